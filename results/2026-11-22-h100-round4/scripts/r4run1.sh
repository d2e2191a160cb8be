#!/bin/bash
# Round 4, device run 1: split keys merged in a thread-block cluster (standalone harness, A/B),
# then the device tests at the final commit and the bench of the mission archive.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/r4r1; mkdir -p $R/cluster
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune, bin/runner.test, kernels/); cluster harness devrun/cl (sdpa.cu = $C + SDPA_SPLIT_CLUSTER); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
bash devrun/cl/run.sh > $R/cluster/ab.txt 2>&1
cp devrun/cl/main.cu devrun/cl/run.sh $R/cluster/ && gzip -9c devrun/cl/sdpa.cu > $R/cluster/sdpa-cluster.cu.gz
(cd runner && EVOTUNE_GPU_TESTS=1 EVOTUNE_SWEEP_N=60 EVOTUNE_SWEEP_N_D128=20 EVOTUNE_EVIDENCE_DIR=$R timeout 300 ../bin/runner.test -test.run 'TestDeviceFamilySweep|TestDeviceWorkerBasics|TestDeviceWorkerFaults' -test.v -test.timeout 295s > $R/device-tests.log 2>&1; echo "device tests rc=$?" >> $R/device-tests.log)
mkdir -p /tmp/arch && cp -r results/2026-11-22-h100-round3/mission-b/mission /tmp/arch/mission && gunzip -f /tmp/arch/mission/results.jsonl.gz
timeout 150 bin/evotune bench --archive /tmp/arch/mission --shapes 1x8x512x64,2x8x512x64 --out $R/bench-mission --cache /tmp/cache > $R/bench-mission.log 2>&1
cd $R && gzip -9 family-sweep.json 2>/dev/null; tar czf $OUT/r4run1.tgz .
grep -E "p50" cluster/ab.txt | awk '{print $1, $2, $NF, $(NF-4)}' | sort | uniq -c | head -0
grep -E "^(--- |ok|FAIL|PASS)|rc=" device-tests.log | tail -8; grep -E "^\| [0-9]" bench-mission/bench.md; tail -2 bench-mission.log
