#!/bin/bash
# Device run: cluster-merged split A/B, standalone harness.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
nvcc --version | tail -1
B="-DSDPA_BLOCK_N=128 -DSDPA_MIN_BLOCKS=2"
declare -A V
V[base]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3"
V[k2]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2"
V[c2]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c2st2]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c2w8]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_WARPS=8 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c4]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=4 -DSDPA_SPLIT_CLUSTER=1"
V[c4st2]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=4 -DSDPA_SPLIT_CLUSTER=1"
V[c2m64]="$B -DSDPA_BLOCK_M=64 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c2m64w8]="$B -DSDPA_BLOCK_M=64 -DSDPA_STAGES=3 -DSDPA_WARPS=8 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c4m64]="$B -DSDPA_BLOCK_M=64 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=4 -DSDPA_SPLIT_CLUSTER=1"
V[c2bn64]="-DSDPA_BLOCK_N=64 -DSDPA_MIN_BLOCKS=2 -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1"
V[c2causal]="$B -DSDPA_BLOCK_M=32 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2 -DSDPA_SPLIT_CLUSTER=1 -DSDPA_CAUSAL=1"
V[c4causal]="$B -DSDPA_BLOCK_M=64 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=4 -DSDPA_SPLIT_CLUSTER=1 -DSDPA_CAUSAL=1"
mkdir -p bin
for k in "${!V[@]}"; do
  nvcc -std=c++17 -arch=sm_90 -O3 ${V[$k]} -I. -Xptxas -v -o bin/$k main.cu > bin/$k.log 2>&1 &
done
wait
for k in "${!V[@]}"; do echo "$k: ${V[$k]} :: $(grep -E 'Used|spill' bin/$k.log | grep -A0 -B0 -m4 -E 'Used|spill' | tr '\n' ' ' | head -c 300)"; [ -x bin/$k ] || cat bin/$k.log; done
for r in 1 2 3; do
  for sh in "1 8 512" "2 8 512"; do
    for k in base c2 k2 c2st2 c2w8 c4 c4st2 c2m64 c2m64w8 c4m64 c2bn64; do ./bin/$k $sh $k; done
  done
done
./bin/c2causal 1 8 512 c2causal; ./bin/c2causal 2 8 1000 c2causal; ./bin/c4causal 1 4 1000 c4causal
./bin/c2 1 3 1000 c2-tail; ./bin/c4 1 3 1000 c4-tail
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv,noheader
