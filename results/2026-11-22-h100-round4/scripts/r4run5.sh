#!/bin/bash
# Round 4, device run 5: block_n=256 in the space. Correctness checks of 256-key tiles
# (causal, bf16, D=128, ragged S), a 1x8x512x64 tune seeded with them, and its bench.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/r4r5; mkdir -p $R
C=$(cat devrun/commit); export EVOTUNE_COMMIT=$C
echo "commit $C (bin/evotune, bin/runner.test, kernels/); $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" > $R/info.txt
ck() { echo "== check $*" >> $R/checks.txt; timeout 90 bin/evotune check "$@" --cache /tmp/cache >> $R/checks.txt 2>&1; echo "rc=$?" >> $R/checks.txt; }
ck --config block_m=32,block_n=256,warps=8,stages=3 --shape 1x8x512x64
ck --config block_m=32,block_n=256,warps=8,stages=3 --shape 1x8x512x64 --causal
ck --config block_m=32,block_n=256,warps=8,stages=3 --shape 2x3x1000x64 --causal --dtype bf16
ck --config block_m=64,block_n=256,warps=8,stages=2 --shape 2x3x1000x64
ck --config block_m=64,block_n=256,warps=8,stages=1 --shape 2x4x1000x128 --causal
ck --config block_m=32,block_n=256,warps=8,stages=2,ws=1,producer_warps=2 --shape 1x8x512x64
ck --config block_m=32,block_n=256,warps=8,stages=2,split_kv=2 --shape 1x4x1000x64
timeout 260 bin/evotune tune --shape 1x8x512x64 --budget 200s --archive $R/tune1x8 --cache /tmp/cache \
  --seed-config block_m=32,block_n=256,warps=8,stages=3 --seed-config block_m=32,block_n=256,warps=8,stages=3,min_blocks_per_sm=1,kv_layout=pad \
  --seed-config block_m=32,block_n=256,warps=8,stages=2 --seed-config block_m=32,block_n=128,stages=3,min_blocks_per_sm=2 > $R/tune1x8.log 2>&1
bin/evotune show --archive $R/tune1x8 --top 8 > $R/tune1x8-show.txt 2>&1
timeout 120 bin/evotune bench --archive $R/tune1x8 --shapes 1x8x512x64 --out $R/bench-1x8 --cache /tmp/cache > $R/bench-1x8.log 2>&1
cd $R && gzip -9 tune1x8/results.jsonl 2>/dev/null; tar czf $OUT/r4run5.tgz .
grep -E "^==|^rc=|timed|error|correct" checks.txt | cut -c1-160; tail -3 tune1x8.log; head -14 tune1x8-show.txt; grep -E "^- best|^\| [0-9]" bench-1x8/bench.md
