#!/usr/bin/env bash
# Device run (H100): fp8 with the wgmma knob, as a user runs it. Steps:
#   sweep64: TestDeviceFP8 (every knob value, wgmma's included, through every
#            fp8 check case), a tune of 4x16x2048x64 and its bench;
#   long:    tunes and benches of 4x16x2048x128 and 8x16x4096x64 causal;
#   short:   a tune and bench of 1x8x512x64.
# Each bench times the fp8 best beside PyTorch's fp16 backends and beside the
# H100's tuned fp16 archive of that shape (results/2026-11-22-h100-retune or
# -index), in one run. bin/evotune (CGO_ENABLED=1) and bin/runner.test are
# built on the development machine; EVOTUNE_COMMIT names the commit. Outputs
# go to $OUT/run-STEP.tar.gz.
set -u
B=bin/evotune
step=${1:?step}
# Steps up to splitk wrote /tmp/run/STEP and tarred it at the end; later
# steps write straight under $OUT, so a run cut short still returns its files.
case $step in final*) O=$OUT/$step ;; *) O=/tmp/run/$step ;; esac
mkdir -p $O
{ date -u; echo "step: $step"; echo "commit: ${EVOTUNE_COMMIT:-?}"; nvidia-smi -L; nvcc --version | tail -1; python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'; } > $O/env.txt
cat $O/env.txt
RT=results/2026-11-22-h100-retune
tb() { # name shape budget baseline-archive [causal] [seed config]
  local n=$1 shape=$2 budget=$3 base=$4 causal=${5:-} seed=${6:-}
  $B tune --dtype fp8 --shape $shape ${causal:+--causal} ${seed:+--seed-config $seed} --budget $budget --archive $O/fp8-$n > $O/tune-$n.out 2> $O/tune-$n.err; echo "tune $n rc $?"
  tail -n 14 $O/tune-$n.out
  $B bench --archive $O/fp8-$n --baseline-archive $base --shapes $shape${causal:+:causal} --out $O/bench-$n > /dev/null 2> $O/bench-$n.err; echo "bench $n rc $?"
  cat $O/bench-$n/bench.md
}
case $step in
sweep64)
  EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=12 timeout 230 bin/runner.test -test.run 'TestDeviceFP8$' -test.v -test.timeout 225s > $O/device-fp8.txt 2>&1; echo "TestDeviceFP8 rc $?"
  grep -E "^(---|ok|FAIL|PASS)|wgmma=q" $O/device-fp8.txt | tail -n 30
  tb long64 4x16x2048x64 150s $RT/archive-long64 ;;
long)
  tb d128 4x16x2048x128 140s $RT/archive-d128
  tb causal 8x16x4096x64 160s $RT/archive-causal causal ;;
diag)
  # What the gate says of mma.sync and wgmma at the same tiles, and their
  # time beside PyTorch and the fp16 best, whatever the gate says.
  E=block_m=128,warps=4,block_n=64,stages=3,pv_fp8=0
  G=block_m=128,warps=8,block_n=64,stages=2,pv_fp8=0,pv_accum=0
  for wg in off qk qk_pv; do
    $B check --dtype fp8 --shape 4x16x2048x64 --config $E,wgmma=$wg > $O/check-e-$wg.txt 2>&1; echo "check e $wg rc $?"
    $B check --dtype fp8 --shape 4x16x2048x128 --config $G,wgmma=$wg > $O/check-g-$wg.txt 2>&1; echo "check g $wg rc $?"
  done
  tail -n 6 $O/check-*.txt
  A=results/2026-11-25-h100-wgmma-tune/sweep64/fp8-long64
  $B bench --archive $A --config $E,wgmma=qk_pv --baseline-archive $RT/archive-long64 --shapes 4x16x2048x64 --out $O/bench-e > /dev/null 2> $O/bench-e.err; echo "bench e rc $?"
  $B bench --archive $A --config $G,wgmma=qk --baseline-archive $RT/archive-d128 --shapes 4x16x2048x128 --out $O/bench-g > /dev/null 2> $O/bench-g.err; echo "bench g rc $?"
  cat $O/bench-e/bench.md $O/bench-g/bench.md | grep -E "^\| [0-9]|incorrect"
  tb short 1x8x512x64 90s results/2026-11-25-h100-index ;;
diag2)
  # diag's checks and benches again, with configs the Go constraints admit
  # (diag's E needs pv_accum=0 to fit the register estimate) and archives of
  # the right head dimension and mask for bench (one-evaluation tunes).
  E=block_m=128,warps=4,block_n=64,stages=3,pv_fp8=0,pv_accum=0
  G=block_m=128,warps=8,block_n=64,stages=2,pv_fp8=0,pv_accum=0
  C=block_m=128,warps=8,block_n=64,stages=3,pv_fp8=0
  $B check --dtype fp8 --shape 4x16x2048x64 --config $E,wgmma=qk_pv > $O/check-e-qk_pv.txt 2>&1; echo "check e qk_pv rc $?"
  $B check --dtype fp8 --shape 4x16x2048x64 --config $E,wgmma=off > $O/check-e-off.txt 2>&1; echo "check e off rc $?"
  $B check --dtype fp8 --shape 4x16x2048x128 --config $G,wgmma=qk > $O/check-g-qk.txt 2>&1; echo "check g qk rc $?"
  grep -hE "correct|gate|max" $O/check-*.txt | head -n 30
  $B tune --dtype fp8 --shape 4x16x2048x128 --evals 1 --archive $O/fp8-d128-one > /dev/null 2>&1; echo "tune d128 one rc $?"
  $B tune --dtype fp8 --shape 8x16x4096x64 --causal --evals 1 --archive $O/fp8-causal-one > /dev/null 2>&1; echo "tune causal one rc $?"
  A=results/2026-11-25-h100-wgmma-tune/sweep64/fp8-long64
  bc() { # name archive config shape baseline
    $B bench --archive $2 --config $3 --baseline-archive $5 --shapes $4 --out $O/bench-$1 > /dev/null 2> $O/bench-$1.err; echo "bench $1 rc $?"
    grep -E "^\| [0-9]|^- [0-9]" $O/bench-$1/bench.md
  }
  bc e-qk_pv $A $E,wgmma=qk_pv 4x16x2048x64 $RT/archive-long64
  bc g-qk $O/fp8-d128-one $G,wgmma=qk 4x16x2048x128 $RT/archive-d128
  bc g-qk_pv $O/fp8-d128-one $G,wgmma=qk_pv 4x16x2048x128 $RT/archive-d128
  bc c-qk $O/fp8-causal-one $C,wgmma=qk 8x16x4096x64:causal $RT/archive-causal ;;
splitk)
  # The experiment SDPA_WGMMA_SPLITK=1 (each k32 step of Q K^T into a fresh
  # wgmma accumulator, summed in fp32) through check's gates, by
  # --kernel-source: does the scale-16 error fall within the gate?
  sed 's/^#define SDPA_WGMMA_SPLITK 0$/#define SDPA_WGMMA_SPLITK 1/' kernels/sdpa.cu > /tmp/sdpa_splitk.cu
  grep -c '^#define SDPA_WGMMA_SPLITK 1$' /tmp/sdpa_splitk.cu
  E=block_m=128,warps=4,block_n=64,stages=3,pv_fp8=0,pv_accum=0
  G=block_m=128,warps=8,block_n=64,stages=2,pv_fp8=0,pv_accum=0
  C=block_m=128,warps=8,block_n=64,stages=3,pv_fp8=0
  ck() { # name shape config [causal]
    $B check --dtype fp8 --kernel-source /tmp/sdpa_splitk.cu --shape $2 ${4:+--causal} --config $3 > $O/check-$1.txt 2>&1; echo "check $1 rc $?"
    grep -E "correctness|timing|p50|ptxas" $O/check-$1.txt
  }
  ck e-qk_pv 4x16x2048x64 $E,wgmma=qk_pv
  ck e-qk 4x16x2048x64 $E,wgmma=qk
  ck g-qk 4x16x2048x128 $G,wgmma=qk
  ck c-qk 8x16x4096x64 $C,wgmma=qk causal ;;
final1)
  # At the commit where every E4M3 wgmma k32 step has its own accumulator
  # and the sm_90 fp8 default is wgmma=qk: the device sweep, then the long
  # shape's tune and bench.
  EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=16 timeout 150 bin/runner.test -test.run 'TestDeviceFP8$' -test.v -test.timeout 145s > $O/device-fp8.txt 2>&1; echo "TestDeviceFP8 rc $?"
  grep -E "^(---|ok|FAIL|PASS)|^        [a-z0-9]" $O/device-fp8.txt | tail -n 20
  tb long64 4x16x2048x64 120s $RT/archive-long64 ;;
final2)
  # wgmma=qk_pv out of the space (its D=128 fault); the long shapes tuned
  # again, each seeded with the config its wgmma check timed (splitk/).
  tb long64s 4x16x2048x64 60s $RT/archive-long64 "" block_m=128,warps=4,block_n=64,stages=3,pv_fp8=0,pv_accum=0,wgmma=qk
  tb d128s 4x16x2048x128 60s $RT/archive-d128 "" block_m=128,warps=8,block_n=64,stages=2,pv_fp8=0,pv_accum=0,wgmma=qk ;;
short)
  tb short 1x8x512x64 90s results/2026-11-25-h100-index ;;
esac
case $step in final*) ;; *) tar -czf $OUT/run-$step.tar.gz -C /tmp/run $step ;; esac
