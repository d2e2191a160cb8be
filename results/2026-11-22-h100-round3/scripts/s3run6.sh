#!/bin/bash
# Session 3, device run 6: causal warp skip + per-warp mask A/B and sweep (working tree); mission re-tune and bench (commit in devrun/commit).
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r6; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune), runner.test from the working tree with devrun/s3skip/sdpa.cu, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=60 EVOTUNE_SWEEP_N_D128=20 EVOTUNE_EVIDENCE_DIR=$R timeout 200 ../bin/runner.test -test.run 'TestDeviceFamilySweep' -test.v -test.timeout 195s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
for rep in 1 2 3; do
  for src in s3sf s3skip; do
    one causal-pad $src "block_m=128,kv_layout=pad" 8x16x4096x64 --causal
    one causal $src "block_m=128" 8x16x4096x64 --causal
    one causal-128x32 $src "block_m=128,block_n=32" 8x16x4096x64 --causal
  done
done
bin/evotune tune --shape 1x8x512x64 --shape 2x8x512x64 --budget 150s --archive $R/mission --cache /tmp/cache --progress-every 30s \
  --seed-config stages=4,block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2 --seed-config stages=3,block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2 \
  --seed-config stages=3,block_m=32,block_n=128 > $R/mission.log 2>&1
echo "mission rc=$?" >> $R/mission.log
bin/evotune show --archive $R/mission > $R/mission-show.txt 2>&1
bin/evotune bench --archive $R/mission --shapes 1x8x512x64,2x8x512x64 --out $R/bench-mission --cache /tmp/cache > $R/bench-mission.log 2>&1
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/s3run6.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=" $R/sweep.log | tail -4; sort -s -k1,1 ab.txt | cut -c1-160; tail -2 mission.log; head -12 mission-show.txt; grep -E "^\|" bench-mission/bench.md | head; tail -3 bench-mission.log
