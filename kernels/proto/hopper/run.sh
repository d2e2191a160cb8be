#!/bin/bash
# Builds fa8.cu's variants (the harness over kernels/fa8h.cu, as the family builds it: no -use_fast_math) and the H100's tuned fp16 bests (kernels/proto/wgmma/wg.cu), checks the fa8 builds
# (every check case, in parallel), then times everything one after another on the same GPU, PyTorch's fp16 SDPA
# last. Run on the H100: bash kernels/proto/hopper/run.sh STEP > out.txt 2>&1
cd "$(dirname "$0")"
T=${TMPDIR:-/tmp}/fa8proto; mkdir -p "$T"
NVCC=${NVCC:-nvcc}
# The step's variants (steps/STEP.txt: name | macros | timed B H S) and the ones checked through every case
# (steps/STEP.check).
STEP=${1:-first}
mapfile -t V < "steps/$STEP.txt"
read -r -a CHECK < "steps/$STEP.check"
echo "step $STEP $(date -u +%FT%TZ) commit ${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader) $($NVCC --version | tail -1)"
for v in "${V[@]}"; do
  IFS='|' read -r name mac shape <<<"$v"
  # $mac first: a step's -Ibase (an older fa8h.cu) is searched before ../..
  $NVCC -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v $mac -I../.. -o "$T/$name" fa8.cu > "$T/$name.log" 2>&1 &
done
# The tuned fp16 bests (results/2026-11-22-h100-retune, as kernels/proto/wgmma/run.sh builds them; the short
# shape's from results/2026-11-26-h100-qkf16/run.sh).
mapfile -t F <<'F'
f16best64|-DSDPA_BLOCK_M=128 -DSDPA_STAGES=3 -DSDPA_KV_SWIZZLE=0|4 16 2048
f16best128|-DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_BLOCK_N=32 -DSDPA_Q_IN_REGS=0 -DSDPA_MIN_BLOCKS=2|4 16 2048
f16bestcausal|-DSDPA_CAUSAL=1 -DSDPA_BLOCK_M=128|8 16 4096
f16bestshort|-DSDPA_BLOCK_M=32 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3|1 8 512
F
for f in "${F[@]}"; do
  IFS='|' read -r name mac shape <<<"$f"
  $NVCC -O3 -std=c++17 -gencode arch=compute_90,code=sm_90 $mac -o "$T/$name" ../wgmma/wg.cu > "$T/$name.log" 2>&1 &
done
wait
for v in "${V[@]}"; do
  IFS='|' read -r name mac shape <<<"$v"
  echo "--- $name: $mac: $(grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill stores|C75[0-9]+' "$T/$name.log" | tr '\n' ' ')"
  [ -x "$T/$name" ] || { grep -m5 error "$T/$name.log"; continue; }
done
# Checks through every case, in parallel (CPU reference).
for name in "${CHECK[@]}"; do ( timeout 300 "$T/$name" check > "$T/$name.check" 2>&1 ) & done
wait
for name in "${CHECK[@]}"; do echo "=== check $name"; cat "$T/$name.check"; done
echo "=== checks: $(for n in "${CHECK[@]}"; do cat "$T/$n.check"; done | grep -c '^check') cases, $(for n in "${CHECK[@]}"; do cat "$T/$n.check"; done | grep -c FAIL) FAIL"
echo "=== timing (L2-warm mean of 200 launches after 20)"
{
for v in "${V[@]}" "${F[@]}"; do
  IFS='|' read -r name mac shape <<<"$v"
  [ -x "$T/$name" ] || continue
  case $name in
  f16*) out=$(timeout 120 "$T/$name" $shape | tail -1) ;;
  *) full=$(timeout 120 "$T/$name" time $shape); echo "$full" | grep "^V transpose" | sed "s/^/$name: /"; out=$(echo "$full" | tail -1) ;;
  esac
  echo "$name: $out"
done
python3 torch_sdpa.py
} | tee "$T/timing.txt"
echo "=== ratios (one run, one GPU)"
python3 ratios.py < "$T/timing.txt"
