#!/bin/bash
# Device run: 1x8x512x64 on the H200, the first family's tuned fp8 config (results/2026-11-26-h100-qkf16/tune/fp8-short,
# an H100 tune, compiled from this commit's sdpa.cu) and sdpa-hopper's short-shape best (v_smem=1, from
# results/2026-11-26-h200-vsmem/cli/short), each through `evotune bench` beside our tuned fp16 archive
# (results/2026-11-22-h100-tune300) and PyTorch, one after the other in one call.
# From the repository root, bin/evotune built here (CGO_ENABLED=1): bash results/2026-11-26-h200-vt/short.sh OUT
set -u
mkdir -p $1; O=$(cd $1 && pwd); F16=results/2026-11-22-h100-tune300
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
bin/evotune bench --archive results/2026-11-26-h100-qkf16/tune/fp8-short --baseline-archive $F16 --out $O/sdpa-fp8 > $O/sdpa-fp8.log 2>&1
echo "sdpa fp8 rc $?"; tail -n 1 $O/sdpa-fp8/bench.md
bin/evotune bench --family sdpa-hopper --dtype fp8 --shapes 1x8x512x64 --baseline-archive $F16 --out $O/hopper \
  --config bn=128,exp_emu=0,ncw=1,persistent=1,pingpong=0,pregs=56,pv_accum=0,pv_late=0,qk_split=1,stages=6,v_smem=1 > $O/hopper.log 2>&1
echo "hopper rc $?"; tail -n 1 $O/hopper/bench.md
