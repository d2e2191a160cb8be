#!/bin/bash
# Session 3, device run 13: D=128 with 128x64 tiles (flash's tiling) without the XOR address steps (a few bytes of spill), timed with a build whose ptxas gate allows 64 B of spill.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r13; mkdir -p $R
echo "bin/evotune-spill: $(cat devrun/commit) with the spill gate at 64 B; devrun/s3nox/sdpa.cu = that source with kXorStep = false; $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
one() { # label src config shape
  if [ $2 = final ]; then ks=""; else ks="--kernel-source devrun/$2/sdpa.cu"; fi
  line=$(timeout 90 bin/evotune-spill check $ks --config "$3" --shape $4 --cache /tmp/cache 2>&1 | grep -E "^(timed|ptxas|error|evotune)" | tr '\n' ' ' | sed -E 's/\(95% CI[^)]*\)//; s/, 0 B static shared, 0 B stack//; s/ptxas: +ok, //; s/timed: +//')
  echo "$1 $4 $2: $line" >> $R/ab.txt
}
for rep in 1 2; do
  one d128-128x32-best final "block_m=128,block_n=32,q_in_regs=0,min_blocks_per_sm=2" 4x16x2048x128
  one d128-128x64 s3nox "block_m=128,block_n=64,q_in_regs=0" 4x16x2048x128
  one d128-128x64-st3 s3nox "block_m=128,block_n=64,q_in_regs=0,stages=3" 4x16x2048x128
  one d128-128x64-pad s3nox "block_m=128,block_n=64,q_in_regs=0,kv_layout=pad" 4x16x2048x128
  one d128-128x64-xor final "block_m=128,block_n=64,q_in_regs=0" 4x16x2048x128
  one d128-128x32-nox s3nox "block_m=128,block_n=32,q_in_regs=0,min_blocks_per_sm=2" 4x16x2048x128
done
cp $R/* $OUT/
cat $R/ab.txt | cut -c1-170
