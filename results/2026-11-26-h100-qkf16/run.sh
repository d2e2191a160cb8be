#!/usr/bin/env bash
# Device run (H100): qk_f16, fp8's Q K^T in fp16 on mma.sync (Q's E4M3
# fragments widened once per CTA, K's per tile) against the E4M3 mma.sync
# that ptxas unpacks on sm_90. Steps:
#   pairs: the wgmma proto harness (kernels/proto/wgmma/wg.cu: max error at
#      S = 1, 77, 500, 512 against float64, then the mean of 200 launches)
#      builds each config with SDPA_QK_F16=0 and 1 and times both, with the
#      SASS's loop counts; then check's gate and timing of the short shape's
#      tuned best with qk_f16=0 and 1; then TestDeviceFP8 (its sample covers
#      every value of every fp8 knob, qk_f16's included).
#   tune: a 150 s fp8 tune of 1x8x512x64 seeded from the tuned best with
#      qk_f16=1 and from step pairs' fastest short config (s4: the fp16
#      short best's tiles, qk_f16=1), and its bench beside the fp16 archive
#      of results/2026-11-25-h100-index; first check's gate and timing of s4
#      with qk_f16=0 and 1.
#   confirm: step tune's bench three more times, each a fresh process with
#      the committed archive (tune/fp8-short) beside the same fp16 archive,
#      to see whether the 0.99 of one run holds from run to run.
#   ncu: Nsight Compute on the short shape: the tuned fp8 best (step tune's
#      bench) and the tuned fp16 best of results/2026-11-25-h100-index, built
#      into the proto harness from the flags the space renders (check
#      --compile-only prints them), one launch of 1x8x512x64 each: how many
#      instructions each issues, and where the time goes.
#   long: a 420 s fp8 tune of 4x16x2048x64 (about four times the longest
#      before), seeded with the tuned best of
#      results/2026-11-26-h100-fp8-profile, and its bench beside the tuned
#      fp16 archive of results/2026-11-22-h100-retune.
# bin/evotune (CGO_ENABLED=1) and bin/runner.test are built on the
# development machine; EVOTUNE_COMMIT names the commit.
set -u
B=$PWD/bin/evotune
step=${1:?step}
O=$OUT/$step; W=/tmp/run-$step; mkdir -p $O $W
{ date -u; echo "step: $step"; echo "commit: ${EVOTUNE_COMMIT:-?}"; nvidia-smi -L; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'; } > $O/env.txt 2>&1
cat $O/env.txt
SHORT=block_m=16,block_n=256,fast_exp=1,kv_layout=swizzle,min_blocks_per_sm=2,persistent=0,producer_warps=1,pv_accum=1,pv_fp8=0,q_in_regs=1,qk_accum=0,split_kv=1,stages=3,warps=4,wgmma=off,ws=0
case $step in
pairs)
  F8B="-arch=sm_90 -DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_KV_SWIZZLE=1 -DSDPA_Q_IN_REGS=1 -DSDPA_FAST_EXP=1 -DSDPA_WGMMA=0"
  mapfile -t V <<VV
s1|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=16 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|1 8 512
s2|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=1 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=16 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|1 8 512
s3|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=16 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=2|1 8 512
s4|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=32 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3|1 8 512
s5|$F8B -DSDPA_PV_FP8=1 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=16 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|1 8 512
l1|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
l2|$F8B -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
VV
  cd kernels/proto/wgmma
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    for q in 0 1; do nvcc -O3 -std=c++17 $f -DSDPA_QK_F16=$q -o $W/$n-$q wg.cu > $W/$n-$q.log 2>&1 & done
  done
  nvcc -O3 -std=c++17 -arch=sm_90 -DSDPA_BLOCK_M=32 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -o $W/h16short wg.cu > $W/h16short.log 2>&1 &
  wait; cd - > /dev/null
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    for q in 0 1; do echo "=== $n qk_f16=$q ($s)"
      if [ -x $W/$n-$q ]; then timeout 60 $W/$n-$q $s 2>&1 | tail -n 5
        cuobjdump -sass $W/$n-$q | grep -cE 'HMMA' | sed 's/^/HMMA /'; cuobjdump -sass $W/$n-$q | grep -cE 'F2FP' | sed 's/^/F2FP /'
      else grep -m3 -i error $W/$n-$q.log; fi
    done
  done 2>&1 | tee $O/proto.txt
  echo "=== h16short (fp16 short best's tiles, 1 8 512)"; timeout 60 $W/h16short 1 8 512 2>&1 | tail -n 2 | tee -a $O/proto.txt
  for q in 0 1 0 1; do
    $B check --dtype fp8 --shape 1x8x512x64 --config ${SHORT},qk_f16=$q > $W/check-$q.txt 2>&1; echo "check short qk_f16=$q rc $?"
    grep -E "correctness|timed|max" $W/check-$q.txt | head -n 4
  done 2>&1 | tee $O/check.txt
  EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=16 timeout 200 bin/runner.test -test.run 'TestDeviceFP8$' -test.v -test.timeout 195s > $W/device-fp8.txt 2>&1; echo "TestDeviceFP8 rc $?"
  grep -E "^(---|ok|FAIL|PASS)|qk_f16=1|failed" $W/device-fp8.txt | tail -n 30 | tee $O/device-fp8-summary.txt
  tar czf $O/files.tar.gz -C $W --exclude='*-[01]' --exclude=h16short . ;;
tune)
  S4=block_m=32,warps=8,block_n=256,stages=3,pv_fp8=0,qk_accum=0,pv_accum=1,wgmma=off
  for q in 0 1 0 1; do
    $B check --dtype fp8 --shape 1x8x512x64 --config ${S4},qk_f16=$q > $W/check-s4-$q.txt 2>&1; echo "check s4 qk_f16=$q rc $?"
    grep -E "correctness|timed" $W/check-s4-$q.txt
  done 2>&1 | tee $O/check-s4.txt
  $B tune --dtype fp8 --shape 1x8x512x64 --budget 150s --seed-config ${SHORT},qk_f16=1 \
    --seed-config block_m=32,warps=8,block_n=256,stages=3,pv_fp8=0,qk_accum=0,pv_accum=1,wgmma=off,qk_f16=1 --archive $W/fp8-short > $O/tune-short.out 2> $O/tune-short.err; echo "tune rc $?"
  tail -n 14 $O/tune-short.out
  $B bench --archive $W/fp8-short --baseline-archive results/2026-11-25-h100-index --shapes 1x8x512x64 --out $W/bench-short > /dev/null 2> $O/bench-short.err; echo "bench rc $?"
  cp $W/bench-short/bench.md $O/bench-short.md; cat $O/bench-short.md
  tar czf $O/files.tar.gz -C $W . ;;
confirm)
  A=$W/fp8-short; cp -r results/2026-11-26-h100-qkf16/tune/fp8-short $A
  for i in 1 2 3; do
    $B bench --archive $A --baseline-archive results/2026-11-25-h100-index --shapes 1x8x512x64 --out $W/bench-$i > /dev/null 2> $W/bench-$i.err; echo "bench $i rc $?"
    cp $W/bench-$i/bench.md $O/bench-$i.md; grep -E '^\| 1x8x512x64' $O/bench-$i.md
  done ;;
ncu)
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); $NCU --version | tail -1
  SECT="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats"
  F8F="-DSDPA_HEAD_DIM=64 -DSDPA_BF16=0 -DSDPA_CAUSAL=0 -DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_WS=0 -DSDPA_PRODUCER_WARPS=1 -DSDPA_STAGES=3 -DSDPA_BLOCK_M=16 -DSDPA_BLOCK_N=256 -DSDPA_WARPS=4 -DSDPA_FAST_EXP=1 -DSDPA_PERSISTENT=1 -DSDPA_Q_IN_REGS=1 -DSDPA_KV_SWIZZLE=1 -DSDPA_MIN_BLOCKS=2 -DSDPA_SPLIT_KV=1 -DSDPA_PV_FP8=0 -DSDPA_PV_ACCUM=0 -DSDPA_QK_ACCUM=1 -DSDPA_QK_F16=1 -DSDPA_WGMMA=0"
  F16F="-DSDPA_HEAD_DIM=64 -DSDPA_BF16=0 -DSDPA_CAUSAL=0 -DSDPA_WS=0 -DSDPA_PRODUCER_WARPS=1 -DSDPA_STAGES=3 -DSDPA_BLOCK_M=32 -DSDPA_BLOCK_N=256 -DSDPA_WARPS=8 -DSDPA_FAST_EXP=1 -DSDPA_PERSISTENT=0 -DSDPA_Q_IN_REGS=1 -DSDPA_KV_SWIZZLE=1 -DSDPA_MIN_BLOCKS=1 -DSDPA_SPLIT_KV=1"
  cd kernels/proto/wgmma
  nvcc -O3 -std=c++17 -arch=sm_90 $F8F -o $W/n-fp8 wg.cu > $W/n-fp8.log 2>&1 &
  nvcc -O3 -std=c++17 -arch=sm_90 $F16F -o $W/n-fp16 wg.cu > $W/n-fp16.log 2>&1 &
  wait; cd - > /dev/null
  for n in fp8 fp16; do
    $W/n-$n 1 8 512 | tail -n 1
    timeout 120 $NCU --clock-control none --kernel-name sdpa_fwd --launch-skip 8 --launch-count 1 $SECT $W/n-$n 1 8 512 > $O/ncu-$n.txt 2>&1; echo "ncu $n rc $?"
    grep -E "Grid Size|Block Size|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  |Warp Cycles Per Issued|No Eligible|Stall" $O/ncu-$n.txt | head -n 16
  done ;;
long)
  $B tune --dtype fp8 --shape 4x16x2048x64 --budget 420s --seed-config block_m=128,warps=4,block_n=64,stages=3,min_blocks_per_sm=2,pv_fp8=0,pv_accum=0,wgmma=qk \
    --archive $W/fp8-long > $O/tune-long.out 2> $O/tune-long.err; echo "tune rc $?"
  tail -n 14 $O/tune-long.out
  $B bench --archive $W/fp8-long --baseline-archive results/2026-11-22-h100-retune/archive-long64 --shapes 4x16x2048x64 --out $W/bench-long > /dev/null 2> $O/bench-long.err; echo "bench rc $?"
  cp $W/bench-long/bench.md $O/bench-long.md; cat $O/bench-long.md
  mkdir -p $O/fp8-long; cp $W/fp8-long/meta.json $O/fp8-long/; gzip -c $W/fp8-long/results.jsonl > $O/fp8-long/results.jsonl.gz ;;
*) echo "unknown step $step"; exit 2 ;;
esac
