#!/bin/bash
# replays: variants x files x seed chunks, one core each
RP="$(ls runner/testdata/replay/*.jsonl.gz)"
: > /tmp/jobs
for v in XB1T8:1:8 XB1:1:3 B8T8:0:8; do for f in $RP; do for c in 1 11 21 31 41 51 61 71 81 91; do echo "$v $f $c" >> /tmp/jobs; done; done; done
for f in runner/testdata/ktcache/GEMM_A100.json.gz runner/testdata/ktcache/convolution_A100.json.gz runner/testdata/ktcache/heldout/*.json.gz; do echo "B8T8:0:8 $f 0" >> /tmp/jobs; done
run1() {
  set -- $1
  IFS=: read v k t <<< "$1"; f=$2; c=$3
  b=$(basename $f .jsonl.gz); D=bin/devout2/$v; mkdir -p $D
  [ -s $D/$b.$c.json ] && return 0
  if [ $c = 0 ]; then b=$(basename $f .json.gz); EVOTUNE_XBATCH=$k bin/evox bench-search --kt-cache $f --budgets 25,50,100,200,400,800,1600 --tournament $t --strategies evo --seeds 100 --parallel 1 --format json > $D/$b.tmp 2>/dev/null && mv $D/$b.tmp $D/$b.json; return; fi
  EVOTUNE_XBATCH=$k bin/evox bench-search --replay $f --tournament $t --strategies evo --seeds 10 --first-seed $c --parallel 1 --format json > $D/$b.$c.tmp 2>/dev/null && mv $D/$b.$c.tmp $D/$b.$c.json
}
export -f run1
time (cat /tmp/jobs | tr '\n' '\0' | timeout ${T:-540} xargs -0 -P $(nproc) -I{} bash -c 'run1 "{}"')
ls bin/devout2/*/*.json | wc -l
tar czf $OUT/res.tgz --exclude='*.tmp' bin/devout2
