#!/usr/bin/env bash
# Device run (H100): does a longer fp8 tune reach our best fp16 at the short
# shape? The fp8 archive of results/2026-11-25-h100-fp8-tune (1x8x512x64, 100 s,
# 90 evaluations) is resumed to a total budget of 7 minutes, then benched in one
# run beside the fp16 archive of results/2026-11-25-h100-index (414 evaluations,
# best 4.98 us) and PyTorch's fp16 backends. Run from the repository root with
# bin/evotune built on the development machine and EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/fp8-short; mkdir -p "$O"
B=bin/evotune
{ date -u; echo "commit: ${EVOTUNE_COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$O/env.txt"
A=/tmp/fp8-512; rm -rf $A; cp -r results/2026-11-25-h100-fp8-tune/run/fp8-512 $A; gunzip $A/results.jsonl.gz
F=/tmp/fp16-512; rm -rf $F; mkdir -p $F; cp results/2026-11-25-h100-index/meta.json results/2026-11-25-h100-index/results.jsonl.gz $F/
$B tune --dtype fp8 --shape 1x8x512x64 --archive $A --budget 7m --progress-every 60s > "$O/tune.out" 2> "$O/tune.err"; echo "tune rc $?"
tail -n 25 "$O/tune.out"
$B bench --archive $A --baseline-archive $F --shapes 1x8x512x64,2x8x512x64 --out "$O/bench" > /dev/null 2> "$O/bench.err"; echo "bench rc $?"
grep "^| " "$O/bench/bench.md"
gzip -c $A/results.jsonl > "$O/fp8-results.jsonl.gz"; cp $A/meta.json "$O/fp8-meta.json"
