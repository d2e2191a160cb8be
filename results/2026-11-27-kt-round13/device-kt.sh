#!/bin/bash
# device job: variants x spaces, one core each
KT="runner/testdata/ktcache/GEMM_A100.json.gz runner/testdata/ktcache/convolution_A100.json.gz $(ls runner/testdata/ktcache/heldout/*.json.gz)"
RP="$(ls runner/testdata/replay/*.jsonl.gz)"
jobs=/tmp/jobs.txt; : > $jobs
for f in $RP; do echo "XB1 1 rp $f" >> $jobs; done
for v in XB1T8 XB1T64; do
  for f in $KT; do echo "$v 1 kt $f" >> $jobs; done
done
run1() {
  set -- $1
  v=$1 k=$2 kind=$3 f=$4
  b=$(basename $f); b=${b%%.json*}
  D=bin/devout; mkdir -p $D/$v
  [ -s $D/$v/$b.json ] && return 0
  if [ $kind = kt ]; then a="--kt-cache $f --budgets 25,50,100,200,400,800,1600"; else a="--replay $f"; fi
  t=${v#XB1T}; [ "$t" = "$v" ] && t=3; EVOTUNE_XBATCH=$k bin/evox bench-search $a --tournament $t --strategies evo --seeds 100 --parallel 1 --format json > $D/$v/$b.tmp 2>$D/$v/$b.err && mv $D/$v/$b.tmp $D/$v/$b.json
}
export -f run1
# longest first: GEMM and replays
sort -t' ' -k4 $jobs | awk '{print}' > /tmp/j2
grep ' rp ' /tmp/j2 > /tmp/j3; grep GEMM /tmp/j2 >> /tmp/j3; grep -v GEMM /tmp/j2 | grep -v ' rp ' >> /tmp/j3
nproc
time (cat /tmp/j3 | tr '\n' '\0' | timeout ${T:-540} xargs -0 -P $(nproc) -I{} bash -c 'run1 "{}"')
ls bin/devout/*/*.json | wc -l
tar czf $OUT/res.tgz --exclude='*.tmp' bin/devout
