#!/bin/bash
# Device run (H100): the sdpa-hopper family through the command line as a user runs it.
#   check: `evotune check --family sdpa-hopper` of the default config at the three long shapes of #13 (every check
#          case through the fp8 gate, then the timing).
#   d64:   a 120 s tune ($TUNE_BUDGET) of 4x16x2048x64 from the family's default, and its bench beside our tuned fp16 archive
#          (results/2026-11-22-h100-retune) and PyTorch, in one run.
#   d128, causal: the same at 4x16x2048x128 and 8x16x4096x64 causal.
# From the repository root, with bin/evotune built here (CGO_ENABLED=1): bash results/2026-11-26-h100-hopperfam/run.sh STEP
# (RESULTS=DIR writes the step folders under DIR instead of beside this script.)
set -u
O=${RESULTS:-results/2026-11-26-h100-hopperfam}/$1; mkdir -p $O; W=${TMPDIR:-/tmp}/hopperfam; mkdir -p $W
B=bin/evotune
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; } > $O/env.txt
tb() { # name shape archive-of-fp16 [--causal]
  $B tune --family sdpa-hopper --dtype fp8 --shape $2 ${4:-} --budget ${TUNE_BUDGET:-120s} --archive $W/$1 > $O/tune-$1.out 2> $O/tune-$1.err; echo "tune $1 rc $?"
  tail -n 14 $O/tune-$1.out
  $B bench --archive $W/$1 --baseline-archive $3 --shapes $2${4:+:causal} --out $W/bench-$1 > /dev/null 2> $O/bench-$1.err; echo "bench $1 rc $?"
  cp $W/bench-$1/bench.md $O/bench-$1.md 2>/dev/null; cp $W/bench-$1/bench.json $O/bench-$1.json 2>/dev/null; cat $O/bench-$1.md 2>/dev/null || tail -n 20 $O/bench-$1.err
  mkdir -p $O/archive; cp $W/$1/meta.json $O/archive/; gzip -c $W/$1/results.jsonl > $O/archive/results.jsonl.gz
}
R=results/2026-11-22-h100-retune
case $1 in
check)
  for s in "4x16x2048x64" "4x16x2048x128" "8x16x4096x64 --causal"; do
    n=$(echo $s | tr -d ' -'); $B check --family sdpa-hopper --dtype fp8 --shape $s > $O/check-$n.txt 2>&1; echo "check $s rc $?"; tail -n 12 $O/check-$n.txt
  done ;;
d64) tb d64 4x16x2048x64 $R/archive-long64 ;;
d128) tb d128 4x16x2048x128 $R/archive-d128 ;;
causal) tb causal 8x16x4096x64 $R/archive-causal --causal ;;
esac
