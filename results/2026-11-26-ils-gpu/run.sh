#!/bin/bash
# Two tunes of the same problem on the device, one with the defaults and one with --ils, same seed and
# budget, to check --ils on the real compile-check-time pipeline (not a replay): that ILS epochs run,
# keep the generations full, and what each found. Needs bin/evotune (CGO_ENABLED=1 go build -o bin/evotune
# ./cmd/evotune). RESULTS=DIR COMMIT=REV BUDGET=150s bash results/2026-11-26-ils-gpu/run.sh
set -u
export EVOTUNE_COMMIT=${COMMIT:-}
O=${RESULTS:?set RESULTS}; mkdir -p $O; O=$(cd $O && pwd)
{ date -u +%FT%TZ; echo "commit ${COMMIT:-?}"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1; nproc; } > $O/env.txt
for mode in default ils; do
  flag=; [ $mode = ils ] && flag=--ils; mkdir -p $O/$mode
  bin/evotune tune --shape 1x8x512x64 --budget ${BUDGET:-150s} --seed 1 $flag --archive $O/$mode/archive \
    --progress-every 30s > $O/$mode/tune.log 2>&1; echo "$mode tune rc $?"
  python3 - "$O/$mode/archive" > $O/$mode/summary.txt <<'PY'
import json, sys
d = sys.argv[1]
st = json.load(open(d + '/state.json'))
rs = [json.loads(l) for l in open(d + '/results.jsonl')]
ok = sorted(round(r['objective_us'], 2) for r in rs if r.get('status') == 'ok')
print('params', st['params'])
print('generations', st['generation'], 'evals', st['evals'], 'results', len(rs), 'ok', len(ok),
      'restarts', st.get('restarts', 0), 'ILS epoch in progress', st.get('ils') is not None)
print('best objective', ok[:3])
PY
  cat $O/$mode/summary.txt; tail -n 12 $O/$mode/tune.log
done
