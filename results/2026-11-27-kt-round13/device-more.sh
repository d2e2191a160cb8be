#!/bin/bash
# round 13, third device call: label:batch:tournament, files; kt files one job of 100 seeds, replays ten jobs of 10
KT="runner/testdata/ktcache/GEMM_A100.json.gz runner/testdata/ktcache/convolution_A100.json.gz $(ls runner/testdata/ktcache/heldout/*.json.gz)"
FP8=runner/testdata/replay/synthetic-1x8x512x64-fp8.jsonl.gz
: > /tmp/jobs
for c in 1 11 21 31 41 51 61 71 81 91; do echo "B:0:3 $FP8 $c" >> /tmp/jobs; done
for c in 41 51 61 71 81; do echo "XB1:1:3 $FP8 $c" >> /tmp/jobs; done
for f in $KT; do echo "XB1T5:1:5 $f 0" >> /tmp/jobs; done
for f in $KT; do echo "B8T8:0:8 $f 0" >> /tmp/jobs; done
for f in $KT; do echo "XB1T64:1:64 $f 0" >> /tmp/jobs; done
run1() {
  set -- $1
  IFS=: read v k t <<< "$1"; f=$2; c=$3
  D=bin/devout3/$v; mkdir -p $D
  if [ $c = 0 ]; then
    b=$(basename $f .json.gz); [ -s $D/$b.json ] && return 0
    case $v in XB1T64) case $b in pnpoly_GTX_Titan_X|pnpoly_K20|pnpoly_P100|pnpoly_RTX_2070_SUPER|pnpoly_TITAN_RTX|pnpoly_V100) ;; *) return 0;; esac;; esac
    EVOTUNE_XBATCH=$k bin/evox bench-search --kt-cache $f --budgets 25,50,100,200,400,800,1600 --tournament $t --strategies evo --seeds 100 --parallel 1 --format json > $D/$b.tmp 2>/dev/null && mv $D/$b.tmp $D/$b.json
    return
  fi
  b=$(basename $f .jsonl.gz); [ -s $D/$b.$c.json ] && return 0
  EVOTUNE_XBATCH=$k bin/evox bench-search --replay $f --tournament $t --strategies evo --seeds 10 --first-seed $c --parallel 1 --format json > $D/$b.$c.tmp 2>/dev/null && mv $D/$b.$c.tmp $D/$b.$c.json
}
export -f run1
time (cat /tmp/jobs | tr '\n' '\0' | timeout ${T:-540} xargs -0 -P $(nproc) -I{} bash -c 'run1 "{}"')
ls bin/devout3/*/*.json | wc -l
tar czf $OUT/res.tgz --exclude='*.tmp' bin/devout3
