#!/bin/bash
# device job: each line of bin/jobs.txt is "LABEL|kind|file|first|seeds|flags"; one core each
run1() {
  IFS='|' read -r v kind f first seeds flags <<< "$1"
  b=$(basename $f); b=${b%%.json*}
  D=bin/devout/$v; mkdir -p $D
  [ -s $D/$b.$first.json ] && return 0
  if [ $kind = kt ]; then a="--kt-cache $f --budgets 25,50,100,200,400,800,1600"; else a="--replay $f"; fi
  bin/evotune bench-search $a $flags --strategies evo --seeds $seeds --first-seed $first --parallel 1 --format json > $D/$b.$first.tmp 2>$D/$b.$first.err && mv $D/$b.$first.tmp $D/$b.$first.json
}
export -f run1
nproc
time (cat bin/jobs.txt | tr '\n' '\0' | timeout ${T:-540} xargs -0 -P $(nproc) -I{} bash -c 'run1 "{}"')
ls bin/devout/*/*.json | wc -l
tar czf $OUT/res.tgz --exclude='*.tmp' bin/devout
