#!/usr/bin/env bash
# Device run (H100): where fp8's time goes, and the open faults. Steps:
#   a: TestDeviceFP8 at this commit (qk_accum's first device run); Nsight
#      Compute profiles of the tuned fp8 best (wgmma=qk), the tuned fp16 best
#      and PyTorch's cuDNN fp16 kernel at 4x16x2048x64; the bisection of P V
#      as wgmma (SDPA_WGMMA=2) with the wgmma proto harness.
#   b: a seeded tune and bench of 8x16x4096x64 causal in fp8.
#   p: step a's profiles of our kernels again, through the proto harness
#      (kernels/proto/wgmma/wg.cu: four check launches, then the timed
#      shape's; ncu takes the ninth launch): check's worker launches fewer
#      than the hundred sdpa_fwd that step a skipped.
#   ahead: SDPA_QK_AHEAD (the next tile's Q K^T wgmma issued before this
#      tile's softmax) against the same configs without it: the proto
#      harness times both (L2-warm inputs), then check's gate and timing
#      (--kernel-source: the kernel with the macro's default set to 1). Runs
#      at b73fb62 only: the macro left the kernel after this measurement.
#   stall: the stall reasons of step p's two builds and of cuDNN (ncu), and a
#      seeded tune and bench of 8x16x4096x64 causal from the best causal
#      config of step ahead.
#   short: a 150 s fp8 tune of 1x8x512x64 (wgmma=qk with its split
#      accumulators in the space) and its bench beside the fp16 archive of
#      results/2026-11-25-h100-index.
#   lazy: SDPA_LAZY_RESCALE (skip a tile's rescale of O and l while no row's
#      max outgrew the running one by 2^8), on against off: the proto harness
#      times pairs (fp8 and fp16, four shapes), check times pairs with
#      rotated inputs through the gate, then the fp8, int8 and fp16/bf16
#      device sweeps with it on.
#   interact: evo's screening model with ordinal interactions (its new
#      default) on the GPU path: a 45 s fp16 tune of 1x8x512x64, killed with
#      -9 partway, resumed to 90 s, then shown; the same 90 s with
#      --interact=false beside it.
#   copy: P V as wgmma's wrong results again, with the rows and columns that
#      go non-finite, and with V's fp16 copies swapped (tile 0 in copy 1) or
#      one copy only (a consumer barrier before each widening).
# bin/evotune (CGO_ENABLED=1) and bin/runner.test are built on the
# development machine; EVOTUNE_COMMIT names the commit. Large outputs are
# tarred into $OUT/STEP/files.tar.gz (the call returns a limited number of files).
set -u
B=$PWD/bin/evotune
step=${1:?step}
O=$OUT/$step; W=/tmp/run-$step; mkdir -p $O $W
{ date -u; echo "step: $step"; echo "commit: ${EVOTUNE_COMMIT:-?}"; nvidia-smi -L; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())'
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); echo "ncu: $NCU"; [ -n "$NCU" ] && $NCU --version | tail -1; } > $O/env.txt 2>&1
cat $O/env.txt
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
RT=results/2026-11-22-h100-retune
FP8=block_m=128,warps=4,block_n=64,stages=3,min_blocks_per_sm=2,pv_fp8=0,pv_accum=0,wgmma=qk
FP16=stages=3,block_m=128,kv_layout=pad
MET="--metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"
SECT="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section InstructionStats"
case $step in
a)
  EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=16 timeout 170 bin/runner.test -test.run 'TestDeviceFP8$' -test.v -test.timeout 165s > $O/device-fp8.txt 2>&1; echo "TestDeviceFP8 rc $?"
  grep -E "^(---|ok|FAIL|PASS)|^        [a-z0-9]|failed" $O/device-fp8.txt | tail -n 24
  # ncu on check: the check cases come first (one launch each), then the
  # timing's launches at the problem shape; skip well past the cases and
  # print the grid to show which launch was taken.
  prof() { # name dtype config
    timeout 240 $NCU --target-processes all --clock-control none --kernel-name sdpa_fwd --launch-skip 100 --launch-count 1 $SECT $B check --dtype $2 --shape 4x16x2048x64 --config $3 > $W/ncu-$1.txt 2>&1; echo "ncu $1 rc $?"
    grep -E "Grid Size|Block Size|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|Warp Cycles Per Issued|No Eligible" $W/ncu-$1.txt | head -n 20
    timeout 200 $NCU --target-processes all --clock-control none --kernel-name sdpa_fwd --launch-skip 100 --launch-count 1 $MET \
      $B check --dtype $2 --shape 4x16x2048x64 --config $3 > $W/ncu-$1-pipes.txt 2>&1; echo "ncu $1 pipes rc $?"
    grep -E "sm__|Grid|==ERR|==WARN" $W/ncu-$1-pipes.txt | head -n 12
  }
  prof fp8 fp8 $FP8
  prof fp16 fp16 $FP16
  cat > $W/cudnn.py <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(4, 16, 2048, 64, device="cuda", dtype=torch.half) for _ in range(3))
for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
    with sdpa_kernel(be):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
  timeout 200 $NCU --clock-control none --kernel-name regex:'sdpa|fmha|flash|attn' --launch-skip 2 --launch-count 1 $SECT \
    python3 $W/cudnn.py > $W/ncu-cudnn.txt 2>&1; echo "ncu cudnn rc $?"
  timeout 100 $NCU --clock-control none --kernel-name regex:'sdpa|fmha|flash|attn' --launch-skip 2 --launch-count 1 $MET python3 $W/cudnn.py > $W/ncu-cudnn-pipes.txt 2>&1; echo "ncu cudnn pipes rc $?"
  grep -E "^  [a-z_].*\(|sm__|==ERR" $W/ncu-cudnn-pipes.txt | head -n 12
  grep -E "^  [a-z_].*\(|Grid Size|Block Size|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|pct_of_peak|Warp Cycles Per Issued|No Eligible" $W/ncu-cudnn.txt | head -n 20
  # P V as wgmma (SDPA_WGMMA=2): which factor of the two wrong results
  # matters. The proto harness (kernels/proto/wgmma/wg.cu) on a copy of the
  # kernel without the ws refusal; each build checks S = 1, 77, 500, 512 and
  # then the shape given (max error, non-finite and unwritten outputs).
  P=$W/proto; mkdir -p $P/kernels/proto/wgmma
  sed '/SDPA_WGMMA=2 is refused with SDPA_WS=1/d' kernels/sdpa.cu > $P/kernels/sdpa.cu
  cp kernels/*.h $P/kernels/ 2>/dev/null; cp kernels/proto/wgmma/wg.cu $P/kernels/proto/wgmma/
  F8="-DSDPA_FP8=1 -DSDPA_PV_FP8=0"
  D128="$F8 -DSDPA_PV_ACCUM=0 -DSDPA_FAST_EXP=0 -DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8"
  WS="$F8 -DSDPA_WS=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64"
  mapfile -t V <<VV
n0|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=4 -DSDPA_WGMMA=2|1 2 4096
n1|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=4 -DSDPA_WGMMA=1|1 2 4096
n2|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=1 -DSDPA_WGMMA=2|1 2 4096
n3|$D128 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=4 -DSDPA_WGMMA=2|1 2 4096
n4|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=2 -DSDPA_SPLIT_KV=4 -DSDPA_WGMMA=2|1 2 4096
n5|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=4 -DSDPA_WGMMA=2|1 2 2048
n6|$D128 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_SPLIT_KV=1 -DSDPA_WGMMA=2|1 2 1024
w0|$WS -DSDPA_STAGES=3 -DSDPA_WGMMA=2|1 2 2048
w1|$WS -DSDPA_STAGES=2 -DSDPA_WGMMA=2|1 2 2048
w2|$WS -DSDPA_STAGES=3 -DSDPA_WGMMA=2 -DSDPA_PRODUCER_WARPS=2|1 2 2048
w3|$F8 -DSDPA_WS=1 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_WGMMA=2|1 2 2048
w4|$WS -DSDPA_STAGES=3 -DSDPA_WGMMA=1|1 2 2048
VV
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    (cd $P/kernels/proto/wgmma && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $f -o $P/$n wg.cu > $P/$n.log 2>&1) &
  done; wait
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    echo "=== $n: $f ($s)"; if [ -x $P/$n ]; then timeout 60 $P/$n $s 2>&1 | tail -n 5; else grep -m3 -i error $P/$n.log; fi
  done 2>&1 | tee $O/bisect.txt
  tar -czf $O/files.tar.gz -C $W $(cd $W && ls ncu-*.txt) ;;
b)
  $B tune --dtype fp8 --shape 8x16x4096x64 --causal --seed-config block_m=128,warps=8,block_n=64,stages=3,pv_fp8=0,wgmma=qk --budget 100s --archive $O/fp8-causal > $O/tune-causal.out 2> $O/tune-causal.err; echo "tune rc $?"
  tail -n 14 $O/tune-causal.out
  $B bench --archive $O/fp8-causal --baseline-archive $RT/archive-causal --shapes 8x16x4096x64:causal --out $W/bench-causal > /dev/null 2> $O/bench-causal.err; echo "bench rc $?"
  cp $W/bench-causal/bench.md $O/bench-causal.md; cat $O/bench-causal.md ;;
p)
  # The flags kernels.SDPASpace renders for the two configs (sm_90).
  COMMON="-DSDPA_HEAD_DIM=64 -DSDPA_BF16=0 -DSDPA_CAUSAL=0 -DSDPA_WS=0 -DSDPA_PRODUCER_WARPS=1 -DSDPA_STAGES=3 -DSDPA_BLOCK_M=128 -DSDPA_BLOCK_N=64 -DSDPA_WARPS=4 -DSDPA_FAST_EXP=1 -DSDPA_PERSISTENT=0 -DSDPA_Q_IN_REGS=1 -DSDPA_SPLIT_KV=1"
  F8F="$COMMON -DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_KV_SWIZZLE=1 -DSDPA_MIN_BLOCKS=2 -DSDPA_PV_FP8=0 -DSDPA_PV_ACCUM=0 -DSDPA_QK_ACCUM=1 -DSDPA_WGMMA=1"
  F16F="$COMMON -DSDPA_KV_SWIZZLE=0 -DSDPA_MIN_BLOCKS=1"
  cd kernels/proto/wgmma
  nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $F8F -o $W/p-fp8 wg.cu > $W/p-fp8.log 2>&1 &
  nvcc -O3 -std=c++17 -arch=sm_90 $F16F -o $W/p-fp16 wg.cu > $W/p-fp16.log 2>&1 &
  wait; cd - > /dev/null
  for n in fp8 fp16; do
    $W/p-$n 4 16 2048 | tail -n 1
    timeout 120 $NCU --clock-control none --kernel-name sdpa_fwd --launch-skip 8 --launch-count 1 $SECT $W/p-$n 4 16 2048 > $W/ncu-$n.txt 2>&1; echo "ncu $n rc $?"
    grep -E "Grid Size|Block Size|Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Compute \(SM\) Throughput|Warp Cycles Per Issued|No Eligible" $W/ncu-$n.txt | head -n 12
    timeout 120 $NCU --clock-control none --kernel-name sdpa_fwd --launch-skip 8 --launch-count 1 $MET $W/p-$n 4 16 2048 > $W/ncu-$n-pipes.txt 2>&1; echo "ncu $n pipes rc $?"
    grep -E "sm__|==ERR" $W/ncu-$n-pipes.txt | head -n 8
  done
  tar -czf $O/files.tar.gz -C $W $(cd $W && ls ncu-*.txt) ;;
stall)
  COMMON="-DSDPA_HEAD_DIM=64 -DSDPA_BF16=0 -DSDPA_CAUSAL=0 -DSDPA_WS=0 -DSDPA_PRODUCER_WARPS=1 -DSDPA_STAGES=3 -DSDPA_BLOCK_M=128 -DSDPA_BLOCK_N=64 -DSDPA_WARPS=4 -DSDPA_FAST_EXP=1 -DSDPA_PERSISTENT=0 -DSDPA_Q_IN_REGS=1 -DSDPA_SPLIT_KV=1"
  F8F="$COMMON -DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_KV_SWIZZLE=1 -DSDPA_MIN_BLOCKS=2 -DSDPA_PV_FP8=0 -DSDPA_PV_ACCUM=0 -DSDPA_QK_ACCUM=1 -DSDPA_WGMMA=1"
  F16F="$COMMON -DSDPA_KV_SWIZZLE=0 -DSDPA_MIN_BLOCKS=1"
  cd kernels/proto/wgmma
  nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $F8F -o $W/p-fp8 wg.cu > $W/p-fp8.log 2>&1 &
  nvcc -O3 -std=c++17 -arch=sm_90 $F16F -o $W/p-fp16 wg.cu > $W/p-fp16.log 2>&1 &
  wait; cd - > /dev/null
  ST='--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
  top() { grep -E "smsp__average_warps_issue_stalled" $1 | awk '{print $NF, $1}' | sort -rn | head -n 9; }
  for n in fp8 fp16; do
    timeout 120 $NCU --clock-control none --kernel-name sdpa_fwd --launch-skip 8 --launch-count 1 $ST $W/p-$n 4 16 2048 > $O/stall-$n.txt 2>&1; echo "stall $n rc $?"; top $O/stall-$n.txt
  done
  cat > $W/cudnn.py <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(4, 16, 2048, 64, device="cuda", dtype=torch.half) for _ in range(3))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        F.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
  timeout 120 $NCU --clock-control none --kernel-name regex:'sdpa|fmha|flash|attn' --launch-skip 2 --launch-count 1 $ST python3 $W/cudnn.py > $O/stall-cudnn.txt 2>&1; echo "stall cudnn rc $?"; top $O/stall-cudnn.txt
  H=block_m=64,warps=4,block_n=64,stages=3,min_blocks_per_sm=2,pv_fp8=0,pv_accum=0,wgmma=qk
  $B tune --dtype fp8 --shape 8x16x4096x64 --causal --seed-config $H --budget 150s --archive $W/fp8-causal > $O/tune-causal.out 2> $O/tune-causal.err; echo "tune rc $?"
  tail -n 14 $O/tune-causal.out
  $B bench --archive $W/fp8-causal --baseline-archive $RT/archive-causal --shapes 8x16x4096x64:causal --out $W/bench-causal > /dev/null 2> $O/bench-causal.err; echo "bench rc $?"
  cp $W/bench-causal/bench.md $O/bench-causal.md; cat $O/bench-causal.md ;;
short)
  $B tune --dtype fp8 --shape 1x8x512x64 --budget 150s --archive $W/fp8-short > $O/tune-short.out 2> $O/tune-short.err; echo "tune rc $?"
  tail -n 14 $O/tune-short.out
  $B bench --archive $W/fp8-short --baseline-archive results/2026-11-25-h100-index --shapes 1x8x512x64 --out $W/bench-short > /dev/null 2> $O/bench-short.err; echo "bench rc $?"
  cp $W/bench-short/bench.md $O/bench-short.md; cat $O/bench-short.md ;;
lazy)
  F8B="-DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_KV_SWIZZLE=1 -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=1 -DSDPA_Q_IN_REGS=1 -DSDPA_FAST_EXP=1"
  mapfile -t V <<VV
f8long|-gencode arch=compute_90a,code=sm_90a $F8B -DSDPA_WGMMA=1 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|4 16 2048
f8acc|-gencode arch=compute_90a,code=sm_90a $F8B -DSDPA_WGMMA=1 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
f8d128|-gencode arch=compute_90a,code=sm_90a $F8B -DSDPA_WGMMA=1 -DSDPA_PV_ACCUM=0 -DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=2|4 16 2048
f8causal|-gencode arch=compute_90a,code=sm_90a $F8B -DSDPA_WGMMA=1 -DSDPA_PV_ACCUM=1 -DSDPA_CAUSAL=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=32 -DSDPA_STAGES=4 -DSDPA_MIN_BLOCKS=2|8 16 4096
f8short|-arch=sm_90 $F8B -DSDPA_WGMMA=0 -DSDPA_QK_ACCUM=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=16 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|1 8 512
h16long|-arch=sm_90 -DSDPA_KV_SWIZZLE=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3|4 16 2048
h16d128|-arch=sm_90 -DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_BLOCK_N=32 -DSDPA_Q_IN_REGS=0 -DSDPA_MIN_BLOCKS=2|4 16 2048
h16causal|-arch=sm_90 -DSDPA_CAUSAL=1 -DSDPA_BLOCK_M=128 -DSDPA_STAGES=2|8 16 4096
h16short|-arch=sm_90 -DSDPA_BLOCK_M=32 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=256 -DSDPA_STAGES=3|1 8 512
VV
  cd kernels/proto/wgmma
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    for l in 0 1; do nvcc -O3 -std=c++17 $f -DSDPA_LAZY_RESCALE=$l -o $W/$n-$l wg.cu > $W/$n-$l.log 2>&1 & done
  done; wait; cd - > /dev/null
  for c in "${V[@]}"; do IFS='|' read -r n f s <<<"$c"
    for l in 0 1; do echo "=== $n lazy=$l ($s)"; if [ -x $W/$n-$l ]; then timeout 60 $W/$n-$l $s 2>&1 | tail -n 2; else grep -m3 -i error $W/$n-$l.log; fi; done
  done 2>&1 | tee $O/proto.txt
  sed 's/^#define SDPA_LAZY_RESCALE 1$/#define SDPA_LAZY_RESCALE 0/' kernels/sdpa.cu > $W/eager.cu; grep -c '^#define SDPA_LAZY_RESCALE 0$' $W/eager.cu
  ck() { # name dtype shape config [causal]
    $B check --dtype $2 --kernel-source $W/eager.cu --shape $3 ${5:+--causal} --config $4 > $O/check-$1-0.txt 2>&1; echo "check $1 lazy=0 rc $?"; grep -E "correctness|timed" $O/check-$1-0.txt
    $B check --dtype $2 --shape $3 ${5:+--causal} --config $4 > $O/check-$1-1.txt 2>&1; echo "check $1 lazy=1 rc $?"; grep -E "correctness|timed" $O/check-$1-1.txt
  }
  ck f8long fp8 4x16x2048x64 block_m=128,warps=4,block_n=64,stages=3,min_blocks_per_sm=2,pv_fp8=0,pv_accum=0,wgmma=qk
  ck f8pv fp8 4x16x2048x64 block_m=128,warps=8,block_n=64,stages=3,pv_fp8=1,pv_accum=0,wgmma=off
  ck h16long fp16 4x16x2048x64 stages=3,block_m=128,kv_layout=pad
  ck h16causal fp16 8x16x4096x64 block_m=128,stages=2 causal
  ck h16short fp16 1x8x512x64 block_m=32,warps=8,block_n=256,stages=3
  EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=16 timeout 150 bin/runner.test -test.run 'TestDeviceFP8$|TestDeviceInt8$' -test.v -test.timeout 145s > $O/device-onebyte.txt 2>&1; echo "TestDeviceFP8/Int8 rc $?"
  grep -E "^(---|ok|FAIL|PASS)|failed" $O/device-onebyte.txt | tail -n 8
  EVOTUNE_GPU_TESTS=1 timeout 200 bin/runner.test -test.run 'TestDeviceFamilySweep$' -test.v -test.timeout 195s > $O/device-sweep.txt 2>&1; echo "TestDeviceFamilySweep rc $?"
  grep -E "^(---|ok|FAIL|PASS)|failed" $O/device-sweep.txt | tail -n 8 ;;
interact)
  $B tune --shape 1x8x512x64 --budget 90s --archive $W/on > $O/tune-on-1.out 2> $O/tune-on-1.err &
  pid=$!; sleep 45; kill -9 $pid; wait $pid 2>/dev/null; echo "killed after 45 s"
  $B tune --shape 1x8x512x64 --budget 90s --archive $W/on > $O/tune-on-2.out 2> $O/tune-on-2.err; echo "resumed rc $?"
  tail -n 3 $O/tune-on-2.err; head -n 4 $O/tune-on-2.out
  $B tune --shape 1x8x512x64 --budget 90s --interact=false --archive $W/off > $O/tune-off.out 2> $O/tune-off.err; echo "off rc $?"
  for a in on off; do echo "== $a"; $B show --archive $W/$a 2>&1 | head -n 9; grep -o '"interact":[a-z]*' $W/$a/state.json $W/$a/meta.json; done 2>&1 | tee $O/show.txt ;;
copy)
  P=$W/proto; mkdir -p $P/kernels/proto/wgmma
  cp kernels/*.h $P/kernels/ 2>/dev/null
  python3 - kernels/proto/wgmma/wg.cu $P/kernels/proto/wgmma/wg.cu <<'PY'
import sys
s = open(sys.argv[1]).read()
s = s.replace("    double maxk = 0, maxref = 0; long bad = 0;", "    double maxk = 0, maxref = 0; long bad = 0; std::vector<int> nrow(s, 0), ncol(d, 0);")
s = s.replace("if (!std::isfinite(got)) { bad++; continue; }", "if (!std::isfinite(got)) { bad++; nrow[i]++; ncol[c]++; continue; }")
s = s.replace("    long unwritten = 0;", """    if (bad) {
        printf("  rows with non-finite outputs (query positions):");
        for (int i = 0, a = -1; i <= s; i++) { bool b = i < s && nrow[i]; if (b && a < 0) a = i; if (!b && a >= 0) { printf(" %d-%d", a, i - 1); a = -1; } }
        int nc = 0; for (int c = 0; c < d; c++) nc += ncol[c] > 0;
        printf("; columns with any: %d of %d\\n", nc, d);
    }
    long unwritten = 0;""")
open(sys.argv[2], "w").write(s)
PY
  grep -c nrow $P/kernels/proto/wgmma/wg.cu
  sed '/SDPA_WGMMA=2 is refused with SDPA_WS=1/d' kernels/sdpa.cu > $W/base.cu
  sed 's/(j \& 1) \* kVWTileBytes/((j + 1) \& 1) * kVWTileBytes/; s/widen_v(vw_at(0), /widen_v(vw_at(0), /' $W/base.cu > $W/swap.cu
  sed 's/(j \& 1) \* kVWTileBytes/0 * kVWTileBytes/; s/^    constexpr int kTotal = BN \* kChunks;$/    consumer_sync();\n    constexpr int kTotal = BN * kChunks;/' $W/base.cu > $W/one.cu
  grep -c '((j + 1) & 1)' $W/swap.cu; grep -c '0 \* kVWTileBytes' $W/one.cu; grep -B1 -c 'constexpr int kTotal' $W/one.cu
  F8="-DSDPA_FP8=1 -DSDPA_PV_FP8=0 -DSDPA_WGMMA=2"
  N2="$F8 -DSDPA_PV_ACCUM=0 -DSDPA_FAST_EXP=0 -DSDPA_HEAD_DIM=128 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3"
  W0="$F8 -DSDPA_WS=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3"
  for v in base swap one; do
    mkdir -p $W/$v/kernels/proto/wgmma; cp $P/kernels/proto/wgmma/wg.cu $W/$v/kernels/proto/wgmma/; cp $W/$v.cu $W/$v/kernels/sdpa.cu
    cp kernels/*.h $W/$v/kernels/ 2>/dev/null
    for c in n2 w0; do [ $c = n2 ] && f=$N2 || f=$W0
      (cd $W/$v/kernels/proto/wgmma && nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a $f -o $P/$c-$v wg.cu > $P/$c-$v.log 2>&1) &
    done
  done; wait
  for v in base swap one; do for c in n2 w0; do
    echo "=== $c $v"; if [ -x $P/$c-$v ]; then timeout 60 $P/$c-$v 1 2 1024 2>&1 | head -n 12; else grep -m3 -i error $P/$c-$v.log; fi
  done; done 2>&1 | tee $O/copy.txt ;;
ahead)
  BASE="-DSDPA_HEAD_DIM=64 -DSDPA_BF16=0 -DSDPA_WS=0 -DSDPA_PRODUCER_WARPS=1 -DSDPA_FAST_EXP=1 -DSDPA_PERSISTENT=0 -DSDPA_Q_IN_REGS=1 -DSDPA_SPLIT_KV=1 -DSDPA_FP8=1 -DSDPA_OUT_BF16=0 -DSDPA_KV_SWIZZLE=1 -DSDPA_PV_FP8=0 -DSDPA_QK_ACCUM=1 -DSDPA_WGMMA=1"
  mapfile -t V <<VV
e|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|4 16 2048|0
c1|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|4 16 2048|0 1
c2|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=4 -DSDPA_MIN_BLOCKS=2|4 16 2048|0 1
c3|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=1|4 16 2048|0 1
c4|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=4 -DSDPA_MIN_BLOCKS=1|4 16 2048|0 1
c5|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|4 16 2048|0 1
c6|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=128 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=1|4 16 2048|0 1
h1|-DSDPA_CAUSAL=1 -DSDPA_PV_ACCUM=1 -DSDPA_BLOCK_M=128 -DSDPA_WARPS=8 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=1|8 16 4096|0 1
h2|-DSDPA_CAUSAL=1 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|8 16 4096|0 1
s1|-DSDPA_CAUSAL=0 -DSDPA_PV_ACCUM=0 -DSDPA_BLOCK_M=64 -DSDPA_WARPS=4 -DSDPA_BLOCK_N=64 -DSDPA_STAGES=3 -DSDPA_MIN_BLOCKS=2|1 8 512|0 1
VV
  cd kernels/proto/wgmma
  for c in "${V[@]}"; do IFS='|' read -r n f s qs <<<"$c"
    for q in $qs; do nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Xptxas -v $BASE $f -DSDPA_QK_AHEAD=$q -o $W/$n-$q wg.cu > $W/$n-$q.log 2>&1 & done
  done; wait; cd - > /dev/null
  for c in "${V[@]}"; do IFS='|' read -r n f s qs <<<"$c"
    for q in $qs; do
      r=$(grep -A3 "entry function .sdpa_fwd" $W/$n-$q.log | grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' ')
      echo "=== $n ahead=$q ($s) $r"; if [ -x $W/$n-$q ]; then timeout 60 $W/$n-$q $s 2>&1 | tail -n 2; else grep -m3 -i error $W/$n-$q.log; fi
    done
  done 2>&1 | tee $O/proto.txt
  sed 's/^#define SDPA_QK_AHEAD 0$/#define SDPA_QK_AHEAD 1/' kernels/sdpa.cu > $W/ahead.cu; grep -c '^#define SDPA_QK_AHEAD 1$' $W/ahead.cu
  ck() { # name shape config [causal]
    $B check --dtype fp8 --shape $2 ${4:+--causal} --config $3 > $O/check-$1-0.txt 2>&1; echo "check $1 ahead=0 rc $?"
    grep -E "ptxas|correctness|timed" $O/check-$1-0.txt
    $B check --dtype fp8 --kernel-source $W/ahead.cu --shape $2 ${4:+--causal} --config $3 > $O/check-$1-1.txt 2>&1; echo "check $1 ahead=1 rc $?"
    grep -E "ptxas|correctness|timed" $O/check-$1-1.txt
  }
  ck c1 4x16x2048x64 block_m=64,warps=4,block_n=64,stages=3,min_blocks_per_sm=2,pv_fp8=0,pv_accum=0,wgmma=qk
  ck c3 4x16x2048x64 block_m=128,warps=8,block_n=64,stages=3,pv_fp8=0,pv_accum=0,wgmma=qk
  ck h1 8x16x4096x64 block_m=128,warps=8,block_n=64,stages=3,pv_fp8=0,wgmma=qk causal ;;
esac
