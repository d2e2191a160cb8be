#!/bin/bash
# Round 4, device run 2: is the L2 the shared limit at 1x8x512x64? The tuned config at 1..16
# heads (CTAs 16..256), standalone harness, inputs rotated beyond the L2.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/r4r2; mkdir -p $R
cd devrun/cl && cp ../../kernels/sdpa.cu ../../kernels/sdpa_params.h .
mkdir -p bin
B="-DSDPA_BLOCK_N=128 -DSDPA_MIN_BLOCKS=2 -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3"
nvcc -std=c++17 -arch=sm_90 -O3 $B -I. -o bin/base main.cu
nvcc -std=c++17 -arch=sm_90 -O3 $B -DSDPA_WARPS=8 -I. -o bin/w8 main.cu
echo "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); kernels/sdpa.cu of $(cat ../commit); $B" > $R/heads.txt
for r in 1 2 3; do for h in 1 2 4 6 8 12 16; do ./bin/base 1 $h 512 base >> $R/heads.txt; done; done
for h in 1 8; do ./bin/w8 1 $h 512 w8 >> $R/heads.txt; done
cd $R && tar czf $OUT/r4run2.tgz .
awk '{print $1, $2, $(NF-4)}' heads.txt | sort -k2,2 -s
