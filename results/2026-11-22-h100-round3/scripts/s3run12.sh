#!/bin/bash
# Session 3, device run 12: tile S-1's load issued after tile 0 is folded in (stages >= 3, D=64): sweep, A/B against 7c79df4, benches.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r12; mkdir -p $R
export EVOTUNE_COMMIT="$(cat devrun/commit)+late-load"
echo "bin/evotune at $(cat devrun/commit); bin/evotune-late, runner.test and devrun/s3late/sdpa.cu from the working tree (that commit + the late load); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=80 EVOTUNE_SWEEP_N_D128=6 EVOTUNE_EVIDENCE_DIR=$R timeout 200 ../bin/runner.test -test.run 'TestDeviceFamilySweep' -test.v -test.timeout 195s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
for rep in 1 2 3; do
  for src in s3final s3late; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 1x8x512x64
    one short-st3-nop $src "block_m=32,block_n=128,min_blocks_per_sm=2,stages=3" 2x8x512x64
    [ $rep = 1 ] && one long-pad $src "stages=3,block_m=128,kv_layout=pad" 4x16x2048x64
  done
done
mkdir -p /tmp/arch && cp -r results/2026-11-22-h100-round3/mission-b/mission /tmp/arch/mission && gunzip -f /tmp/arch/mission/results.jsonl.gz
bin/evotune-late bench --archive /tmp/arch/mission --shapes 1x8x512x64,2x8x512x64 --out $R/bench-mission-late --cache /tmp/cache > $R/bench-mission-late.log 2>&1
bin/evotune-late bench --archive /tmp/arch/mission --config stages=4,block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2 --shapes 1x8x512x64 --out $R/bench-1x8-st4-late --cache /tmp/cache > $R/bench-1x8-st4-late.log 2>&1
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/s3run12.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=|fail" sweep.log | tail -4; sort -s -k1,2 ab.txt | cut -c1-150; grep -hE "^\| [0-9]|^- best" bench-*/bench.md; tail -1 bench-*.log
