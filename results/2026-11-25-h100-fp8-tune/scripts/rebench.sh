#!/usr/bin/env bash
# Device run (H100): the two fp8 archives of run/ benched again at a commit
# whose results record end-to-end accuracy over the input-scale-1 cases, beside
# the H100 night's fp16 archive (read compressed) and PyTorch's fp16 backends.
set -u
R=results/2026-11-25-h100-fp8-tune
B=bin/evotune
O=$OUT/rebench; mkdir -p $O
{ date -u; echo "commit: $EVOTUNE_COMMIT"; nvidia-smi -L; nvcc --version | tail -1; } > $O/env.txt
for a in 512 2048; do cp -r $R/run/fp8-$a /tmp/fp8-$a; done
$B bench --archive /tmp/fp8-512 --baseline-archive results/2026-11-22-h100-night/archive --shapes 1x8x512x64,2x8x512x64 --out $O/bench-512 > /dev/null 2> $O/bench-512.err; echo "bench 512 rc $?"
$B bench --archive /tmp/fp8-2048 --baseline-archive results/2026-11-22-h100-night/archive --shapes 4x16x2048x64,4x16x2048x128,8x16x4096x64:causal --out $O/bench-2048 > /dev/null 2> $O/bench-2048.err; echo "bench 2048 rc $?"
grep -h "^| " $O/bench-512/bench.md $O/bench-2048/bench.md
