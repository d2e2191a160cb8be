#!/bin/bash
# Session 3, device run 7: merge spread over the key slices (each merges and stores a block of O's columns): sweep (working tree) and A/B.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r7; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "bin/evotune at $C; runner.test and devrun/s3ms/sdpa.cu from the working tree (spread merge); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=100 EVOTUNE_SWEEP_N_D128=40 EVOTUNE_EVIDENCE_DIR=$R timeout 240 ../bin/runner.test -test.run 'TestDeviceFamilySweep' -test.v -test.timeout 235s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
for rep in 1 2 3; do
  for src in s3sf s3ms; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 2x8x512x64
    one bm32-w8 $src "block_m=32,block_n=128,warps=8,stages=3" 2x8x512x64
    one bm64-w8 $src "block_m=64,block_n=128,warps=8,stages=4" 2x8x512x64
  done
done
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/s3run7.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=|fail" $R/sweep.log | tail -6; sort -s -k1,2 ab.txt | cut -c1-150
