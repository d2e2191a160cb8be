#!/bin/bash
# usage: BIN=evotune-with-experiment.patch LABEL=x XSTEP=p XSWEEP=n run2.sh files...  -> ${OUT:-out}/LABEL/<base>.json
out=${OUT:-out}/$LABEL; mkdir -p $out
for f in "$@"; do
  b=$(basename $f .json.gz)
  [ -s $out/$b.json ] && continue
  EVOTUNE_XSTEP=$XSTEP EVOTUNE_XSWEEP=$XSWEEP nice $BIN bench-search --kt-cache $f --strategies evo --budgets 25,50,100,200,400,800,1600 --seeds ${SEEDS:-50} --first-seed ${FIRST:-1} --format json $EXTRA > $out/$b.json 2>/dev/null
done
