#!/bin/bash
# Round 4, device run 3: the long shapes' tuned archives benched beside PyTorch at the final commit.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/r4r3; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune, kernels/); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
mkdir -p /tmp/arch
cp -r results/2026-11-22-h100-retune/archive-long64 /tmp/arch/long64
cp -r results/2026-11-22-h100-retune/archive-d128 /tmp/arch/d128
cp -r results/2026-11-22-h100-round3/causal-2/causal /tmp/arch/causal
for a in long64 d128 causal; do [ -f /tmp/arch/$a/results.jsonl.gz ] && gunzip -f /tmp/arch/$a/results.jsonl.gz; done
timeout 170 bin/evotune bench --archive /tmp/arch/long64 --shapes 4x16x2048x64 --out $R/bench-long64 --cache /tmp/cache > $R/bench-long64.log 2>&1
timeout 170 bin/evotune bench --archive /tmp/arch/causal --shapes 8x16x4096x64:causal --out $R/bench-causal --cache /tmp/cache > $R/bench-causal.log 2>&1
timeout 170 bin/evotune bench --archive /tmp/arch/d128 --shapes 4x16x2048x128 --out $R/bench-d128 --cache /tmp/cache > $R/bench-d128.log 2>&1
cd $R && tar czf $OUT/r4run3.tgz .
for b in long64 causal d128; do grep -E "^\| [0-9]" bench-$b/bench.md; tail -1 bench-$b.log; done
