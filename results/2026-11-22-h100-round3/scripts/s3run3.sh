#!/bin/bash
# Session 3, device run 3: prologue order (Q and tile 0 first, Q into registers, then the other tiles) and tile 0 split into K and V groups; A/B against the committed source.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r3; mkdir -p $R
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/0 B spill stores, 0 B spill loads//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
for rep in 1 2 3; do
  for src in s3base s3pro s3kv; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 2x8x512x64
    one short-bn64-st4 $src "block_m=32,block_n=64,persistent=1,min_blocks_per_sm=2,stages=4" 2x8x512x64
    if [ $rep = 1 ]; then
      one long-pad $src "stages=3,block_m=128,kv_layout=pad" 4x16x2048x64
      one causal $src "block_m=128" 8x16x4096x64 --causal
    fi
  done
done
cp $R/ab.txt $OUT/
sort -s -k1,2 $R/ab.txt | cut -c1-200
