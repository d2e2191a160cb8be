#!/usr/bin/env bash
# Device check (H100) after the kernel family seam (kernels.Family,
# FamilyOf): the runner's light device tests, check in fp16 and fp8, a short
# tune, export, and bench beside PyTorch, as a user runs them. Run from the
# repository root with bin/evotune and bin/runner.test built on the
# development machine and EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/family; mkdir -p "$O"
exec > >(tee "$O/run.log") 2>&1
B=bin/evotune
echo "commit ${EVOTUNE_COMMIT:-unknown}, $(date -u +%FT%TZ)"; nvidia-smi -L; nvcc --version | tail -1
echo "== runner device tests"
(cd runner && ../bin/runner.test -test.run '^TestDevice' -test.v 2>&1 | grep -E '^(--- |PASS|FAIL|ok)')
echo "== check fp16 (default config)"
$B check 2>&1 | tail -n 12; echo "rc $?"
echo "== check fp8 at 2x8x1000x128, bf16 out"
$B check --dtype fp8 --out-dtype bf16 --shape 2x8x1000x128 2>&1 | tail -n 12; echo "rc $?"
echo "== tune 60 s, export, bench"
A=/tmp/family-archive; rm -rf $A
$B tune --shape 1x8x512x64 --archive $A --budget 60s --progress-every 30s 2>&1 | tail -n 6
$B export --archive $A --out "$O/export" 2>&1 | tail -n 3; echo "export rc $?"
$B bench --archive $A --out "$O/bench" > /dev/null 2> "$O/bench.err"; echo "bench rc $?"
grep "^| " "$O/bench/bench.md"
rm -rf "$O/export/"*_kernel "$O/export/"*_launch.cu
