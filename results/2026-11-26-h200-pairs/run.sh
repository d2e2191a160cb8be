#!/bin/bash
# Device run: qk_split=3 (D=128's Q K^T as two chains of two k32 steps) through the pipeline and the command line.
# devtests/: TestDeviceHopper (the value alone on the D=128 default and in the covering sample, every fp8 check case).
# bench-pairs/: `evotune bench --config qk_split=3,pv_late=0` at 4x16x2048x128 beside our tuned fp16 archive and PyTorch.
# tune/: a ${TUNE_BUDGET:-110s} tune of 4x16x2048x128 from the family default and its bench (as results/2026-11-26-h100-hopperfam/run.sh d128).
# From the repository root, bin/evotune and bin/runner.test built here (CGO_ENABLED=1): bash results/2026-11-26-h200-pairs/run.sh OUT
set -u
mkdir -p $1/devtests; O=$(cd $1 && pwd); R=results/2026-11-22-h100-retune/archive-d128
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=8 EVOTUNE_EVIDENCE_DIR=$O/devtests ../bin/runner.test -test.run 'TestDeviceHopper' -test.v > $O/devtests/test.log 2>&1; echo "TestDeviceHopper rc $?")
grep -E "^d128|^variant" $O/devtests/hopper.txt
bin/evotune bench --family sdpa-hopper --dtype fp8 --config qk_split=3,pv_late=0 --shapes 4x16x2048x128 --baseline-archive $R --out $O/bench-pairs > $O/bench-pairs.log 2>&1
echo "bench pairs rc $?"; tail -n 1 $O/bench-pairs/bench.md
COMMIT=${COMMIT:-?} TUNE_BUDGET=${TUNE_BUDGET:-110s} RESULTS=$O/tune bash results/2026-11-26-h100-hopperfam/run.sh d128 2>&1 | grep -E "rc|evaluated|best:|^\| 4x16"
