#!/bin/bash
# Device runs for fp8's V given transposed (--v-transposed, sdpa-hopper). From the repository root with bin/evotune
# (CGO_ENABLED=1 go build -o bin/evotune ./cmd/evotune) and bin/runner.test (CGO_ENABLED=1 go test -c -o
# bin/runner.test ./runner): RESULTS=DIR COMMIT=REV bash results/2026-11-26-h200-vgiven/run.sh STEP...
#   devtest  TestDeviceHopper (every variant, V given transposed among them), EVOTUNE_SWEEP_N=${SWEEP_N:-12}
#   bench    the default config at the three long shapes, V given transposed and V as it is, each beside our tuned
#            fp16 archive of that shape (results/2026-11-22-h100-retune) and PyTorch's fp16 backends
#   tunelong tunes (TUNE_BUDGET, default 90s) at the three long shapes with V given transposed, each benched beside
#            our tuned fp16 archive of the shape and PyTorch
#   tune     a short tune (TUNE_BUDGET, default 60s) of 1x8x512x64 with V given transposed, benched beside our tuned
#            fp16 archive (results/2026-11-22-h100-tune300) and PyTorch, exported and built by examples/device-check.sh
#            (CMake example and PyTorch extension)
set -u
export EVOTUNE_COMMIT=${COMMIT:-}
O=${RESULTS:?set RESULTS}; mkdir -p $O/bench $O/tune; O=$(cd $O && pwd); R=results/2026-11-22-h100-retune
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
for step in "$@"; do
  case $step in
  devtest)
    mkdir -p $O/devtest
    (cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=${SWEEP_N:-12} EVOTUNE_EVIDENCE_DIR=$O/devtest ../bin/runner.test \
      -test.run TestDeviceHopper -test.v -test.timeout 9m > $O/devtest/test.log 2>&1); echo "devtest rc $?"
    grep -E "^(--- |ok|FAIL|PASS)" $O/devtest/test.log | tail -5; cat $O/devtest/hopper.txt 2>/dev/null | head -20 ;;
  bench)
    for layout in vt rows; do
      flag=; [ $layout = vt ] && flag=--v-transposed
      for x in "4x16x2048x64 archive-long64 d64" "4x16x2048x128 archive-d128 d128" "8x16x4096x64:causal archive-causal causal"; do
        set -- $x
        bin/evotune bench --family sdpa-hopper --dtype fp8 $flag --config pregs=$(case $3 in d128) echo 24;; *) echo 56;; esac) \
          --shapes $1 --baseline-archive $R/$2 --out $O/bench/$layout-$3 > $O/bench/$layout-$3.log 2>&1 || true
        echo "bench $layout $1"; grep -E "^\| [0-9]" $O/bench/$layout-$3/bench.md 2>/dev/null || tail -n 5 $O/bench/$layout-$3.log
      done
    done ;;
  tunelong)
    # Seeded with the default (--seed-config): a 1 ms shape's short tune starts from what is known to be good.
    for x in "4x16x2048x64 archive-long64 d64" "4x16x2048x128 archive-d128 d128" "8x16x4096x64:causal archive-causal causal"; do
      set -- $x; shape=${1%:causal}; causal=; [ "$shape" != "$1" ] && causal=--causal
      mkdir -p $O/tunelong
      bin/evotune tune --family sdpa-hopper --dtype fp8 --v-transposed --shape $shape $causal --budget ${TUNE_BUDGET:-90s} \
        --seed-config pregs=$(case $3 in d128) echo 24;; *) echo 56;; esac) --archive $O/tunelong/$3 > $O/tunelong/$3.log 2>&1
      echo "tune $1 rc $?"; grep -E "^evotune: .*evals, best" $O/tunelong/$3.log | tail -n 1
      bin/evotune bench --archive $O/tunelong/$3 --baseline-archive $R/$2 --out $O/tunelong/bench-$3 > $O/tunelong/bench-$3.log 2>&1
      echo "bench rc $?"; grep -E "^\| [0-9]" $O/tunelong/bench-$3/bench.md
    done ;;
  tune)
    bin/evotune tune --family sdpa-hopper --dtype fp8 --v-transposed --shape 1x8x512x64 --budget ${TUNE_BUDGET:-60s} \
      --archive $O/tune/archive > $O/tune/tune.log 2>&1; echo "tune rc $?"; tail -n 3 $O/tune/tune.log
    bin/evotune bench --archive $O/tune/archive --baseline-archive results/2026-11-22-h100-tune300 --out $O/tune/bench \
      > $O/tune/bench.log 2>&1; echo "bench rc $?"; grep -E "^\| [0-9]" $O/tune/bench/bench.md
    ARCHIVE=$O/tune/archive bash examples/device-check.sh $O/tune/export > $O/tune/check.log 2>&1; echo "device-check rc $?"
    tail -n 15 $O/tune/check.log ;;
  esac
done
