#!/bin/bash
# Nsight Compute on one timed launch of a built fa8 variant (run.sh builds them into $T): bash prof.sh NAME B H S
T=${TMPDIR:-/tmp}/fa8proto
NCU=${NCU:-ncu}
$NCU --launch-skip 5 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section InstructionStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --metrics sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  "$T/$1" time "$2" "$3" "$4"
