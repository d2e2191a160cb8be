#!/bin/bash
# Session 3, device run 1: softmax of tile j-1 overlapped with the scores of tile j (SDPA_OVERLAP), A/B.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3; mkdir -p $R
SH="block_m=32,block_n=128,persistent=1,min_blocks_per_sm=2"
one() { # label src config shape [extra]
  line=$(timeout 90 bin/evotune check --kernel-source devrun/$2/sdpa.cu --config "$3" --shape $4 ${5:-} --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//')
  echo "$1 $4 ${5:-} $2: $line" >> $R/ab.txt
}
for rep in 1 2; do
  for src in s3base s3ov; do
    one short-st4 $src "$SH,stages=4" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 1x8x512x64
    one short-st3 $src "$SH,stages=3" 2x8x512x64
    one short-ws2 $src "$SH,ws=1,stages=2" 1x8x512x64
    one causal-128x64-st3 $src "block_m=128,stages=3" 8x16x4096x64 --causal
    one causal-128x32-st3 $src "block_m=128,block_n=32,stages=3" 8x16x4096x64 --causal
    one long-128x32-st3 $src "block_m=128,block_n=32,stages=3" 4x16x2048x64
    one d128-64x64-st3 $src "block_m=64,block_n=64,q_in_regs=0,stages=3" 4x16x2048x128
    one d128-64x32-st3 $src "block_m=64,block_n=32,stages=3" 4x16x2048x128
  done
  if [ $rep = 1 ]; then
    one ref-causal-128x64-st2 s3base "block_m=128" 8x16x4096x64 --causal
    one ref-long-pad s3base "stages=3,block_m=128,kv_layout=pad" 4x16x2048x64
    one ref-d128 s3base "block_m=128,block_n=32,q_in_regs=0,min_blocks_per_sm=2" 4x16x2048x128
  fi
done
cp $R/ab.txt $OUT/
cat $R/ab.txt | cut -c1-250
