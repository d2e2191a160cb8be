#!/usr/bin/env bash
# Device run B (H100), after the free score conversion: the smoke program and
# TestDeviceInt8 again, then 120-150 s int8 tunes of 1x8x512x64 and
# 4x16x2048x64 into /tmp/arch (kept for run C). Run from the repository root
# with bin/ built on the development machine and EVOTUNE_COMMIT set.
set -u
O=${OUT:-/tmp/out}/int8b; mkdir -p "$O"
B=bin/evotune
{ date -u; echo "commit: ${EVOTUNE_COMMIT:-unknown}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__)'; } > "$O/env.txt"
bash results/2026-11-25-h100-int8/smoke/run.sh > "$O/smoke.txt" 2>&1; echo "smoke rc $?, lines ok: $(grep -c 'nan 0 unwritten 0' "$O/smoke.txt") of 48"
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=24 ../bin/runner.test -test.run '^TestDeviceInt8$' -test.v) > "$O/devtests.txt" 2>&1; echo "devtests rc $?"
grep -A6 "shape  " "$O/devtests.txt" | head -8
mkdir -p /tmp/arch
for sb in 1x8x512x64:120s 4x16x2048x64:150s; do
  sh=${sb%%:*}; bud=${sb#*:}
  A=/tmp/arch/int8-$sh; rm -rf $A
  $B tune --dtype int8 --shape $sh --archive $A --budget $bud --progress-every 60s > "$O/tune-$sh.out" 2> "$O/tune-$sh.err"; echo "tune $sh rc $?"
  sed -n '1,3p;/│ 1 │/p' "$O/tune-$sh.out"
done
tar -C /tmp -czf "$O/arch.tgz" arch
