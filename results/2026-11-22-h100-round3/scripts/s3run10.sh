#!/bin/bash
# Session 3, device run 10: first tile handed over at once (ws): sweep, A/B against the previous commit; mission re-tune with ws seeds and bench.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r10; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune, runner.test); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=80 EVOTUNE_SWEEP_N_D128=20 EVOTUNE_EVIDENCE_DIR=$R timeout 200 ../bin/runner.test -test.run 'TestDeviceFamilySweep' -test.v -test.timeout 195s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
W="ws=1,block_m=32,block_n=128,persistent=1"
for rep in 1 2; do
  for src in s3lead s3lead2; do
    one ws-pw2-st4 $src "$W,producer_warps=2,stages=4" 1x8x512x64
    one ws-pw2-st3 $src "ws=1,block_m=32,block_n=128,producer_warps=2,stages=3" 2x8x512x64
    one ws-pw2-st3-1x8 $src "ws=1,block_m=32,block_n=128,producer_warps=2,stages=3" 1x8x512x64
  done
done
bin/evotune tune --shape 1x8x512x64 --shape 2x8x512x64 --budget 150s --archive $R/mission --cache /tmp/cache --progress-every 30s \
  --seed-config stages=4,block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2 --seed-config stages=3,block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2 \
  --seed-config ws=1,producer_warps=2,stages=3,block_m=32,block_n=128 --seed-config ws=1,producer_warps=2,stages=4,block_m=32,block_n=128,persistent=1 \
  > $R/mission.log 2>&1
echo "mission rc=$?" >> $R/mission.log
bin/evotune show --archive $R/mission > $R/mission-show.txt 2>&1
bin/evotune bench --archive $R/mission --shapes 1x8x512x64,2x8x512x64 --out $R/bench-mission --cache /tmp/cache > $R/bench-mission.log 2>&1
cd $R && gzip -9 family-sweep.json 2>/dev/null; rm -f mission/lock; tar czf $OUT/s3run10.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=|fail" $R/sweep.log | tail -4; sort -s -k1,2 ab.txt | cut -c1-150; tail -2 mission.log; head -12 mission-show.txt; grep -E "^\| [0-9]" bench-mission/bench.md | head; tail -2 bench-mission.log
