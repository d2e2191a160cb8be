#!/bin/bash
# Session 3, device run 14: a longer causal tune on the final source (seeds include persistent and ws configs), benched twice beside PyTorch.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r14; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
bin/evotune tune --shape 8x16x4096x64 --causal --budget 270s --archive $R/causal --cache /tmp/cache --progress-every 60s \
  --seed-config block_m=128,kv_layout=pad --seed-config block_m=128,kv_layout=pad,stages=3 \
  --seed-config block_m=128,kv_layout=pad,persistent=1,min_blocks_per_sm=2 --seed-config block_m=128,kv_layout=pad,ws=1,producer_warps=2,stages=3 \
  > $R/causal.log 2>&1
echo "causal rc=$?" >> $R/causal.log
bin/evotune show --archive $R/causal > $R/causal-show.txt 2>&1
for i in 1 2; do bin/evotune bench --archive $R/causal --shapes 8x16x4096x64:causal --out $R/bench-causal-$i --cache /tmp/cache > $R/bench-causal-$i.log 2>&1; done
rm -f $R/causal/lock; gzip -9 $R/causal/results.jsonl
cd $R && tar czf $OUT/s3run14.tgz .
tail -2 causal.log; head -14 causal-show.txt; grep -hE "^\| 8x16|^- best" bench-causal-*/bench.md
