#!/bin/bash
# Device run: sdpa-hopper's default configs (no tune) through `evotune bench` at the three long shapes, each beside our
# tuned fp16 archive of that shape (results/2026-11-22-h100-retune) and PyTorch's fp16 backends, in one run each.
# From the repository root, bin/evotune built here (CGO_ENABLED=1): bash results/2026-11-26-h200-vt/bench-defaults.sh OUT
set -u
mkdir -p $1; O=$(cd $1 && pwd); R=results/2026-11-22-h100-retune
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
for x in "4x16x2048x64 archive-long64 d64" "4x16x2048x128 archive-d128 d128" "8x16x4096x64:causal archive-causal causal"; do
  set -- $x
  bin/evotune bench --family sdpa-hopper --dtype fp8 --config pregs=$(case $3 in d128) echo 24;; *) echo 56;; esac) --shapes $1 \
    --baseline-archive $R/$2 --out $O/$3 > $O/$3.log 2>&1; echo "bench $1 rc $?"; tail -n 1 $O/$3/bench.md 2>/dev/null || tail -n 5 $O/$3.log
done
