#!/bin/bash
# usage: BIN=evotune-with-experiment.patch LABEL=x XENV="EVOTUNE_XMINPOP=2" [FIRST=51] run.sh files...
#   -> ${OUT:-out}/LABEL/<base>.json, evo only, seeds FIRST..FIRST+49, budgets 25..1600
out=${OUT:-out}/$LABEL; mkdir -p $out
for f in "$@"; do
  b=$(basename $f .json.gz)
  [ -s $out/$b.json ] && continue
  env $XENV nice $BIN bench-search --kt-cache $f --strategies evo --budgets 25,50,100,200,400,800,1600 --seeds ${SEEDS:-50} --first-seed ${FIRST:-1} --format json > $out/$b.json 2>/dev/null
done
