#!/bin/bash
# Round 4, device run 4: 256-key tiles (fewer tiles per warp) beside the tuned 128-key config, harness.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/r4r4; mkdir -p $R
cd devrun/cl && cp ../../kernels/sdpa.cu ../../kernels/sdpa_params.h . && mkdir -p bin
declare -A V
V[base]="-DSDPA_BLOCK_M=32 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2"
V[n256w4s2]="-DSDPA_BLOCK_M=32 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=2"
V[n256w8s2]="-DSDPA_BLOCK_M=32 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=2 -DSDPA_WARPS=8"
V[n256w8s3]="-DSDPA_BLOCK_M=32 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -DSDPA_WARPS=8"
V[n256m64w8s2]="-DSDPA_BLOCK_M=64 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=2 -DSDPA_WARPS=8"
for k in "${!V[@]}"; do nvcc -std=c++17 -arch=sm_90 -O3 ${V[$k]} -I. -Xptxas -v -o bin/$k main.cu > bin/$k.log 2>&1 & done; wait
echo "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); kernels/sdpa.cu of $(cat ../commit)" > $R/bn256.txt
for k in "${!V[@]}"; do echo "$k: ${V[$k]}: $(grep -E 'Used [0-9]+ reg|spill' bin/$k.log | head -2 | tr -s ' \n' ' ')" >> $R/bn256.txt; done
for r in 1 2 3; do for sh in "1 8 512" "2 8 512"; do for k in base n256w4s2 n256w8s2 n256w8s3 n256m64w8s2; do ./bin/$k $sh $k >> $R/bn256.txt; done; done; done
cd $R && tar czf $OUT/r4run4.tgz .
grep p50 bn256.txt | sed 's/grid.*p50/p50/' | sort -k2,2 -k1,1 -s
