#!/usr/bin/env bash
# Device run A (H100): the int8 dtype's first checks and tunes. The smoke
# program (smoke/), the runner's device tests for int8 and fp8, then 150 s
# int8 tunes of 1x8x512x64 and 4x16x2048x64. Run from the repository root
# with bin/evotune and bin/runner.test built on the development machine and
# EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/int8; mkdir -p "$O"
B=bin/evotune
{ date -u; echo "commit: ${EVOTUNE_COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$O/env.txt"
bash results/2026-11-25-h100-int8/smoke/run.sh > "$O/smoke.txt" 2>&1; echo "smoke rc $?"
grep -c "nan 0 unwritten 0" "$O/smoke.txt"
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=24 ../bin/runner.test -test.run '^TestDevice(Int8|FP8)$' -test.v) > "$O/devtests.txt" 2>&1; echo "devtests rc $?"
grep -E "^(--- |ok|FAIL|PASS)" "$O/devtests.txt" | head
mkdir -p /tmp/arch
for sh in 1x8x512x64 4x16x2048x64; do
  A=/tmp/arch/int8-$sh; rm -rf $A
  $B tune --dtype int8 --shape $sh --archive $A --budget 150s --progress-every 60s > "$O/tune-$sh.out" 2> "$O/tune-$sh.err"; echo "tune $sh rc $?"
  tail -n 14 "$O/tune-$sh.out"
  mkdir -p "$O/arch-$sh"; gzip -c $A/results.jsonl > "$O/arch-$sh/results.jsonl.gz"; cp $A/meta.json $A/state.json "$O/arch-$sh/" 2>/dev/null
done
