#!/usr/bin/env bash
# Device run C (H100): evotune bench of run B's int8 tunes, each in one run
# beside our fp16 best of that shape (results/2026-11-25-h100-index for
# 1x8x512x64, results/2026-11-22-h100-retune/archive-long64 for 4x16x2048x64)
# and PyTorch's fp16 flash and cuDNN. Run from the repository root with
# bin/evotune built on the development machine and EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/int8c; mkdir -p "$O"
B=bin/evotune
{ date -u; echo "commit: ${EVOTUNE_COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$O/env.txt"
bench() { # shape int8-archive fp16-archive-dir
  local sh=$1 a=/tmp/c/int8-$1 f=/tmp/c/fp16-$1
  rm -rf $a $f; mkdir -p /tmp/c; cp -r results/2026-11-25-h100-int8/b/arch/int8-$sh $a
  mkdir -p $f; cp $3/meta.json $3/results.jsonl.gz $f/; [ -f $3/state.json ] && cp $3/state.json $f/
  $B bench --archive $a --baseline-archive $f --shapes $2 --out "$O/bench-$sh" > /dev/null 2> "$O/bench-$sh.err"; echo "bench $sh rc $?"
  grep "^| " "$O/bench-$sh/bench.md"
}
bench 1x8x512x64 1x8x512x64,2x8x512x64 results/2026-11-25-h100-index
bench 4x16x2048x64 4x16x2048x64 results/2026-11-22-h100-retune/archive-long64
