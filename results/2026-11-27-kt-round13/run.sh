#!/bin/bash
# usage: LABEL=x FLAGS="..." XENV="" BUD=25,50,100,200 run.sh files
out=/tmp/x/out/$LABEL; mkdir -p $out
for f in "$@"; do
  b=$(basename $f .json.gz)
  [ -s $out/$b.json ] && continue
  env $XENV nice ${BIN:-/work/main/bin/evotune} bench-search --kt-cache $f --strategies evo --budgets ${BUD:-25,50,100,200} --seeds ${SEEDS:-50} --first-seed ${FIRST:-1} --format json $FLAGS > $out/$b.json 2>/dev/null
done
