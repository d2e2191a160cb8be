#!/usr/bin/env bash
# Device run 2 (H100): mma.sync rates and SASS of fp8 on sm_90 and sm_89 with
# the device's nvcc, the fp8 family through every fp8 check case, and the
# fp16/bf16 worker regressions. bin/runner.test is built on the development
# machine (CGO_ENABLED=1 go test -c -o bin/runner.test ./runner).
set -u
R=results/2026-11-24-h100-fp8
{ date -u; git rev-parse HEAD 2>/dev/null || echo "commit: $EVOTUNE_COMMIT"; nvidia-smi -L; nvcc --version | tail -1; } > $OUT/env.txt
cat $OUT/env.txt
nvcc -O3 -arch=sm_90 -o /tmp/mma $R/mma/mma.cu && /tmp/mma | tee $OUT/mma.txt
for arch in sm_90 sm_89; do
  nvcc -O3 -arch=$arch -cubin -o /tmp/mma_$arch.cubin $R/mma/mma.cu
  for dt in "" "-DSDPA_FP8=1"; do
    nvcc -cubin -arch=$arch -O3 -std=c++17 -Ikernels $dt -o /tmp/k.cubin kernels/sdpa.cu
    echo "sdpa_fwd default $arch ${dt:-fp16}: $(cuobjdump -sass -fun sdpa_fwd /tmp/k.cubin | grep -oE 'HMMA[A-Z0-9._]*|QMMA[A-Z0-9._]*|F2FP[A-Z0-9._]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';') total $(cuobjdump -sass -fun sdpa_fwd /tmp/k.cubin | grep -cE '^\s+/\*[0-9a-f]{4}\*/')"
  done
  echo "mma.cu $arch: $(cuobjdump -sass /tmp/mma_$arch.cubin | grep -oE 'HMMA[A-Z0-9._]*|QMMA[A-Z0-9._]*|F2FP[A-Z0-9._]*' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
done | tee $OUT/sass.txt
export EVOTUNE_GPU_TESTS=1 EVOTUNE_EVIDENCE_DIR=$OUT
EVOTUNE_SWEEP_N=40 timeout 300 bin/runner.test -test.run 'TestDeviceFP8$' -test.v -test.timeout 5m > $OUT/fp8-test.log 2>&1; echo "TestDeviceFP8 rc $?"
cat $OUT/fp8.txt
EVOTUNE_SWEEP_N=24 EVOTUNE_SWEEP_N_D128=8 timeout 240 bin/runner.test -test.run 'TestDeviceFamilySweep|TestDeviceWorkerBasics|TestDeviceWorkerFaults' -test.v -test.timeout 4m > $OUT/fp16-tests.log 2>&1; echo "fp16 device tests rc $?"
grep -E "^(--- |ok|FAIL|PASS)" $OUT/fp16-tests.log $OUT/fp8-test.log
