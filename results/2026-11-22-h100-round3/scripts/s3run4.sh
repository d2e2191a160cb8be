#!/bin/bash
# Session 3, device run 4: lazy O rescale (skip when no row max of the warp grew) and tile 0 split into K and V groups; A/B against the committed source.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r4; mkdir -p $R
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//; s/timed: +//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
for rep in 1 2; do
  for src in s3base s3cur s3lazy s3kv s3lk; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 2x8x512x64
    one long-pad $src "stages=3,block_m=128,kv_layout=pad" 4x16x2048x64
    one causal $src "block_m=128" 8x16x4096x64 --causal
    one d128 $src "block_m=128,block_n=32,q_in_regs=0,min_blocks_per_sm=2" 4x16x2048x128
  done
done
cp $R/ab.txt $OUT/
sort -s -k1,1 $R/ab.txt | cut -c1-170
