#!/bin/bash
# Device run: sdpa-hopper's defaults after a93a9e4 through `evotune check` (every fp8 check case, then the timing) at
# the three long shapes, and TestDeviceHopper with the new defaults and register rules.
# From the repository root, bin/evotune and bin/runner.test built here (CGO_ENABLED=1): bash results/2026-11-26-h200-vt/defaults.sh OUT
set -u
mkdir -p $1/check $1/devtests; O=$(cd $1 && pwd)
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
for s in "4x16x2048x64" "8x16x4096x64 --causal" "4x16x2048x128"; do
  n=$(echo $s | tr -d ' -'); bin/evotune check --family sdpa-hopper --dtype fp8 --shape $s > $O/check/$n.txt 2>&1
  echo "check $s rc $?: $(grep -E 'p50' $O/check/$n.txt | tail -n 1)"
done
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=8 EVOTUNE_EVIDENCE_DIR=$O/devtests ../bin/runner.test -test.run 'TestDeviceHopper' -test.v > $O/devtests/test.log 2>&1; echo "TestDeviceHopper rc $?")
cat $O/devtests/hopper.txt
