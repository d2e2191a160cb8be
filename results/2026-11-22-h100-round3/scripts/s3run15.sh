#!/bin/bash
# Session 3, device run 15: half of the softmax exponentials by polynomial on the FMA pipe (SDPA_EXP_POLY), A/B against the final source.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r15; mkdir -p $R
echo "bin/evotune at $(cat devrun/commit); sources devrun/s3final (= that commit) and devrun/s3poly; $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune|correct)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
for rep in 1 2 3; do
  for src in s3final s3poly; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "block_m=32,block_n=128,min_blocks_per_sm=2,stages=3" 2x8x512x64
    [ $rep = 1 ] && one long-pad $src "stages=3,block_m=128,kv_layout=pad" 4x16x2048x64
    [ $rep = 1 ] && one causal $src "block_m=128" 8x16x4096x64 --causal
    [ $rep = 1 ] && one d128 $src "block_m=128,block_n=32,q_in_regs=0,min_blocks_per_sm=2" 4x16x2048x128
    [ $rep = 1 ] && one bf16-short $src "$SH,stages=4" 1x8x512x64 "--dtype bf16"
  done
done
cp $R/* $OUT/
sort -s -k1,1 $R/ab.txt | cut -c1-230
