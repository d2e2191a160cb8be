#!/bin/bash
# Builds smoke.cu for six int8 configs, non-causal and causal, in parallel,
# and runs each (H100: -arch=sm_90). Run from this folder.
cd "$(dirname "$0")"
ARCH=${ARCH:-sm_90}
mapfile -t CFGS <<'CFGS'
-DSDPA_BLOCK_M=64
-DSDPA_HEAD_DIM=128 -DSDPA_PV_ACCUM=0
-DSDPA_WS=1 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=2 -DSDPA_OUT_BF16=1
-DSDPA_PERSISTENT=1 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=128 -DSDPA_KV_SWIZZLE=0 -DSDPA_Q_IN_REGS=0
-DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_STAGES=1 -DSDPA_FAST_EXP=0 -DSDPA_PV_ACCUM=0
-DSDPA_WARPS=8 -DSDPA_BLOCK_N=128 -DSDPA_HEAD_DIM=128 -DSDPA_WS=1 -DSDPA_PRODUCER_WARPS=2 -DSDPA_STAGES=2
CFGS
T=${TMPDIR:-/tmp}/int8smoke; mkdir -p "$T"
for i in "${!CFGS[@]}"; do for c in 0 1; do
  nvcc -O3 -std=c++17 -arch=$ARCH -DSDPA_INT8=1 -DSDPA_CAUSAL=$c ${CFGS[$i]} -o "$T/t$i-$c" smoke.cu > "$T/b$i-$c.log" 2>&1 &
done; done
wait
for i in "${!CFGS[@]}"; do
  echo "=== ${CFGS[$i]}"
  for c in 0 1; do [ -x "$T/t$i-$c" ] && timeout 300 "$T/t$i-$c" || { echo "build failed:"; head -5 "$T/b$i-$c.log"; }; done
done
