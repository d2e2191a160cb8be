#!/bin/bash
# Builds wg.cu for each config below with mma.sync (sm_90), with Q K^T as
# wgmma (SDPA_WGMMA=1, sm_90a), with P V as wgmma as well (SDPA_WGMMA=2,
# where P V runs in fp16), and the same config in fp16, in parallel; runs each
# (check shapes, then the timed shape) and counts the tensor instructions of
# the SASS. Run from this folder on the H100.
cd "$(dirname "$0")"
T=${TMPDIR:-/tmp}/wgproto; mkdir -p "$T"
# name | dtype macros | config macros | timed B H S. The best* rows are the
# H100's tuned fp16 bests (results/2026-11-22-h100-retune: archive-long64,
# -d128, -causal), built in fp16 only, as the baseline #13's ratios use.
mapfile -t CFGS <<'CFGS'
a|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
b|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=2|4 16 2048
c|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|4 16 2048
d|-DSDPA_FP8=1 -DSDPA_PV_FP8=1|-DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
e|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=128 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
f|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_WS=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
g|-DSDPA_FP8=1 -DSDPA_PV_FP8=0 -DSDPA_PV_ACCUM=0|-DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=2|4 16 2048
h|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_CAUSAL=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|8 16 4096
i|-DSDPA_INT8=1|-DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
j|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=2|1 8 512
k|-DSDPA_FP8=1 -DSDPA_PV_FP8=0|-DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=2 -DSDPA_PERSISTENT=1|4 16 2048
l|-DSDPA_INT8=1 -DSDPA_OUT_BF16=1 -DSDPA_PV_ACCUM=0|-DSDPA_HEAD_DIM=128 -DSDPA_WS=1 -DSDPA_WARPS=4 -DSDPA_BLOCK_M=64 -DSDPA_STAGES=2|4 16 2048
best64|-|-DSDPA_BLOCK_M=128 -DSDPA_STAGES=3 -DSDPA_KV_SWIZZLE=0|4 16 2048
best128|-|-DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_BLOCK_N=32 -DSDPA_Q_IN_REGS=0 -DSDPA_MIN_BLOCKS=2|4 16 2048
bestcausal|-|-DSDPA_CAUSAL=1 -DSDPA_BLOCK_M=128|8 16 4096
CFGS
build() { nvcc -O3 -std=c++17 -gencode arch=compute_${1#sm_},code=$1 -Xptxas -v $2 -o "$T/$3" wg.cu > "$T/$3.log" 2>&1; cuobjdump -sass "$T/$3" > "$T/$3.sass" 2>/dev/null; }
for c in "${CFGS[@]}"; do
  IFS='|' read -r name dt cfg shape <<<"$c"
  build sm_90 "$cfg" "$name-f16" &
  [ "$dt" = - ] && continue
  build sm_90 "$dt $cfg -DSDPA_WGMMA=0" "$name-mma" &
  build sm_90a "$dt $cfg -DSDPA_WGMMA=1" "$name-wg" &
  case "$dt" in *PV_FP8=1*) ;; *) build sm_90a "$dt $cfg -DSDPA_WGMMA=2" "$name-wgpv" & ;; esac
done
wait
for c in "${CFGS[@]}"; do
  IFS='|' read -r name dt cfg shape <<<"$c"
  echo "=== $name: $dt $cfg (timed $shape)"
  for v in mma wg wgpv f16; do
    b="$T/$name-$v"
    [ -e "$b.log" ] || continue
    regs=$(grep -A3 "entry function .sdpa_fwd"  "$b.log" | grep -o "Used [0-9]* registers" | head -1)
    spill=$(grep -A3 "entry function .sdpa_fwd"  "$b.log" | grep -o "[0-9]* bytes spill stores" | head -1)
    ins=$(grep -cE '^\s+/\*[0-9a-f]{4}\*/' "$b.sass")
    tc=$(grep -oE '(HGMMA|QGMMA|IGMMA|HMMA|IMMA|QMMA)\.[A-Z0-9.]*' "$b.sass" | sort | uniq -c | tr '\n' ' ')
    echo "--- $v: $regs, $spill; $ins SASS instructions; $tc"
    if [ -x "$b" ]; then timeout 120 "$b" $shape | tee "$b.out"; else echo "build failed:"; grep -m5 -i error "$b.log"; fi
  done
done
# The timed shape's µs of each build (the last line of its output), and the
# ratios that answer the question: wgmma against mma.sync, and against fp16.
us() { [ -s "$T/$1.out" ] && tail -n 1 "$T/$1.out" | grep -o '| [0-9.]* us' | grep -o '[0-9.]*'; }
echo
echo "config | mma | wg | wgpv | f16 (same tiles) | mma/wg | mma/wgpv | f16/wgpv"
for c in "${CFGS[@]}"; do
  IFS='|' read -r name dt cfg shape <<<"$c"
  m=$(us "$name-mma"); w=$(us "$name-wg"); p=$(us "$name-wgpv"); f=$(us "$name-f16")
  r() { [ -n "$1" ] && [ -n "$2" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' || echo -; }
  echo "$name ($shape) | ${m:--} | ${w:--} | ${p:--} | ${f:--} | $(r "$m" "$w") | $(r "$m" "$p") | $(r "$f" "$p")"
done
