#!/bin/bash
# Device run (H100 or H200): v_smem (the producer transposes V in shared memory) through the pipeline and the
# command line. From the repository root, with bin/evotune and bin/runner.test built here (CGO_ENABLED=1):
#   bash results/2026-11-26-h200-vsmem/run.sh OUTDIR
# devtests/: TestDeviceHopper (each knob value alone on the defaults, v_smem included, through the ptxas gate and
#            every fp8 check case). check/: `evotune check` of the family default with v_smem=0 and 1 at the three
#            long shapes and 1x8x512x64 (every check case, then the timing, inputs rotated beyond the L2).
# short/:    a ${TUNE_BUDGET:-90s} tune of 1x8x512x64 and its bench beside our tuned fp16 archive and PyTorch.
set -u
O=$1; mkdir -p $O/devtests $O/check $O/short; W=${TMPDIR:-/tmp}/vsmem; mkdir -p $W; B=$PWD/bin/evotune
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=8 EVOTUNE_EVIDENCE_DIR=$O/devtests ../bin/runner.test -test.run 'TestDeviceHopper' -test.v > $O/devtests/test.log 2>&1; echo "TestDeviceHopper rc $?")
for s in "1x8x512x64" "4x16x2048x64" "4x16x2048x128" "8x16x4096x64 --causal"; do
  for v in 0 1; do
    n=$(echo $s | tr -d ' -')-v$v; $B check --family sdpa-hopper --dtype fp8 --shape $s --config v_smem=$v > $O/check/$n.txt 2>&1
    echo "check $s v_smem=$v rc $?: $(grep -iE 'p50|µs' $O/check/$n.txt | tail -n 2 | tr '\n' ' ')"
  done
done
$B tune --family sdpa-hopper --dtype fp8 --shape 1x8x512x64 --budget ${TUNE_BUDGET:-90s} --archive $W/short > $O/short/tune.out 2> $O/short/tune.err; echo "tune rc $?"; tail -n 14 $O/short/tune.out
$B bench --archive $W/short --baseline-archive results/2026-11-22-h100-tune300 --shapes 1x8x512x64 --out $W/bench > /dev/null 2> $O/short/bench.err; echo "bench rc $?"
cp $W/bench/bench.md $W/bench/bench.json $O/short/ 2>/dev/null; cat $O/short/bench.md 2>/dev/null || tail -n 20 $O/short/bench.err
mkdir -p $O/short/archive; cp $W/short/meta.json $O/short/archive/; gzip -c $W/short/results.jsonl > $O/short/archive/results.jsonl.gz
