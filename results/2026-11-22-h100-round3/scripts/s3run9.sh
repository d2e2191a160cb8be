#!/bin/bash
# Session 3, device run 9: producers keep two tiles in flight (ws=1, stages>=3): sweep (working tree) and A/B against d5e5bd3.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r9; mkdir -p $R
echo "bin/evotune at $(cat devrun/commit); runner.test and devrun/s3lead/sdpa.cu from the working tree (d5e5bd3 + producer lead); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=100 EVOTUNE_SWEEP_N_D128=30 EVOTUNE_EVIDENCE_DIR=$R timeout 240 ../bin/runner.test -test.run 'TestDeviceFamilySweep' -test.v -test.timeout 235s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
W="ws=1,block_m=32,block_n=128,persistent=1"
for rep in 1 2 3; do
  for src in s3ms s3lead; do
    one ws-pw2-st4 $src "$W,producer_warps=2,stages=4" 1x8x512x64
    one ws-pw1-st4 $src "$W,stages=4" 1x8x512x64
    one ws-pw2-st4 $src "$W,producer_warps=2,stages=4" 2x8x512x64
    one ws-pw2-st3 $src "ws=1,block_m=32,block_n=128,producer_warps=2,stages=3" 2x8x512x64
    one coop-st4 $src "block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2,stages=4" 1x8x512x64
    if [ $rep = 1 ]; then
      one ws-long $src "ws=1,stages=3,block_m=128" 4x16x2048x64
      one ws-d128 $src "ws=1,stages=3,block_m=128,block_n=32,q_in_regs=0" 4x16x2048x128
    fi
  done
done
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/s3run9.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=|fail" $R/sweep.log | tail -6; sort -s -k1,2 ab.txt | cut -c1-150
