#!/usr/bin/env bash
# Device run D (H100): 110 s int8 tunes of 4x16x2048x128 and
# 8x16x4096x64 causal, each then benched in one run beside our fp16 best of
# that shape (results/2026-11-22-h100-retune/archive-d128, -causal) and
# PyTorch's fp16 flash and cuDNN. Run from the repository root with
# bin/evotune built on the development machine and EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/int8d; mkdir -p "$O"
B=bin/evotune
{ date -u; echo "commit: ${EVOTUNE_COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$O/env.txt"
run() { # name shape-flags bench-shape fp16-archive
  local a=/tmp/d/int8-$1 f=/tmp/d/fp16-$1
  rm -rf $a $f; mkdir -p /tmp/d $f
  $B tune --dtype int8 $2 --archive $a --budget 110s --progress-every 60s > "$O/tune-$1.out" 2> "$O/tune-$1.err"; echo "tune $1 rc $?"
  sed -n '1,3p;/│ 1 │/p' "$O/tune-$1.out"
  cp $4/meta.json $4/results.jsonl.gz $f/; [ -f $4/state.json ] && cp $4/state.json $f/
  $B bench --archive $a --baseline-archive $f --shapes $3 --out "$O/bench-$1" > /dev/null 2> "$O/bench-$1.err"; echo "bench $1 rc $?"
  grep "^| " "$O/bench-$1/bench.md"
  mkdir -p "$O/arch-$1"; gzip -c $a/results.jsonl > "$O/arch-$1/results.jsonl.gz"; cp $a/meta.json $a/state.json "$O/arch-$1/"
}
run d128 "--shape 4x16x2048x128" 4x16x2048x128 results/2026-11-22-h100-retune/archive-d128
run causal "--shape 8x16x4096x64 --causal" 8x16x4096x64:causal results/2026-11-22-h100-retune/archive-causal
cd "$(dirname "$O")" && tar -czf int8d.tgz int8d
