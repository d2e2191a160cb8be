#!/usr/bin/env bash
# Device run (H100): fp8 through the command line as a user runs it, in two
# calls. "tune": check --dtype fp8 (fp16 and bf16 outputs) on the GPU and two
# short fp8 tunes (the mission shape and a long one). "bench": each fp8
# archive beside PyTorch's fp16 backends and beside the H100 night's fp16
# archive, in one run each. bin/evotune is built on the development machine
# with CGO_ENABLED=1 and carried; EVOTUNE_COMMIT names the commit. Outputs go
# to $OUT/run as one tarball.
set -u
R=results/2026-11-25-h100-fp8-tune
B=bin/evotune
O=/tmp/run; mkdir -p $O
step=${1:-tune}
{ date -u; echo "step: $step"; echo "commit: $EVOTUNE_COMMIT"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'; } > $O/env-$step.txt
cat $O/env-$step.txt
if [ "$step" = tune ]; then
  $B check --dtype fp8 > $O/check-fp8.txt 2>&1; echo "check fp8 rc $?"
  $B check --dtype fp8 --out-dtype bf16 --shape 2x8x1000x128 > $O/check-fp8-bf16-d128.txt 2>&1; echo "check fp8 bf16 D=128 rc $?"
  tail -n 4 $O/check-fp8.txt
  $B tune --dtype fp8 --shape 1x8x512x64 --budget 100s --archive $O/fp8-512 > $O/tune-512.out 2> $O/tune-512.err; echo "tune 512 rc $?"
  $B tune --dtype fp8 --shape 4x16x2048x64 --budget 150s --archive $O/fp8-2048 > $O/tune-2048.out 2> $O/tune-2048.err; echo "tune 2048 rc $?"
  tail -n 12 $O/tune-512.out $O/tune-2048.out
else
  # The archives come back from the tune step under $R/run.
  tar -xzf $R/run-tune.tar.gz -C /tmp
  fp16=/tmp/fp16-night; mkdir -p $fp16
  cp results/2026-11-22-h100-night/archive/{meta.json,state.json} $fp16/ && gunzip -c results/2026-11-22-h100-night/archive/results.jsonl.gz > $fp16/results.jsonl
  $B bench --archive $O/fp8-512 --dtype fp8 --baseline-archive $fp16 --shapes 1x8x512x64,2x8x512x64 --out $O/bench-512 > /dev/null 2> $O/bench-512.err; echo "bench 512 rc $?"
  $B bench --archive $O/fp8-2048 --dtype fp8 --baseline-archive $fp16 --shapes 4x16x2048x64,4x16x2048x128,8x16x4096x64:causal --out $O/bench-2048 > /dev/null 2> $O/bench-2048.err; echo "bench 2048 rc $?"
  cat $O/bench-512/bench.md $O/bench-2048/bench.md
fi
tar -czf $OUT/run-$step.tar.gz -C /tmp run
