#!/bin/bash
# The early-budget grid (budgets 25, 50, 100), run on the build machine.
# usage: FIRST=1 bash early.sh LABEL "FLAGS"   -> out/early/LABEL/NAME.json for the 22 files
# e.g. early.sh s4 "--batch 1 --tournament 8 --screen 4"; FIRST=101 early.sh s4b "..."
# m2 and s4m2: minok.patch applied, BIN=bin/evox, EVOTUNE_XMINOK=2.
L=$1; F=$2; B=${3:-25,50,100}; BIN=${BIN:-bin/evotune}
out=results/2026-11-27-kt-round14/out/early/$L; mkdir -p $out
for f in runner/testdata/ktcache/heldout/*.json.gz runner/testdata/ktcache/GEMM_A100.json.gz runner/testdata/ktcache/convolution_A100.json.gz; do
  b=$(basename $f .json.gz)
  [ -s $out/$b.json ] && continue
  $BIN bench-search --kt-cache $f --strategies evo --budgets $B --seeds ${SEEDS:-100} --first-seed ${FIRST:-1} --format json $F > $out/$b.json.tmp 2>/dev/null && mv $out/$b.json.tmp $out/$b.json
done
