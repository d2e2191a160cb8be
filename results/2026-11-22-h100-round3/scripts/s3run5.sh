#!/bin/bash
# Session 3, device run 5: correctness sweep of the split first tile; causal re-tune and bench beside PyTorch.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r5; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=60 EVOTUNE_SWEEP_N_D128=10 EVOTUNE_EVIDENCE_DIR=$R timeout 200 ../bin/runner.test -test.run 'TestDeviceFamilySweep|TestDeviceWorkerBasics|TestDeviceWorkerFaults' -test.v -test.timeout 195s > $R/sweep.log 2>&1; echo "sweep rc=$?" >> $R/sweep.log)
bin/evotune tune --shape 8x16x4096x64 --causal --budget 150s --archive $R/causal --cache /tmp/cache --progress-every 30s \
  --seed-config block_m=128 --seed-config block_m=128,block_n=32 --seed-config block_m=128,kv_layout=pad --seed-config block_m=128,stages=3 \
  > $R/causal.log 2>&1
echo "causal rc=$?" >> $R/causal.log
bin/evotune show --archive $R/causal > $R/causal-show.txt 2>&1
bin/evotune bench --archive $R/causal --shapes 8x16x4096x64:causal --out $R/bench-causal --cache /tmp/cache > $R/bench-causal.log 2>&1
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/s3run5.tgz .
grep -E "^(--- |ok|FAIL|PASS)|rc=" $R/sweep.log | tail -6; tail -3 causal.log; head -14 causal-show.txt; cat bench-causal/bench.md | grep -E "^\|" | head -12
