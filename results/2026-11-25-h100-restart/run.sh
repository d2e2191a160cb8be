#!/usr/bin/env bash
# Device run (H100): a GPU tune with evo's restarts on stagnation (the
# default since evo/NOTES.md round 5), 1x8x512x64 for 3 minutes, as a user
# runs it; the state's restart count and the best are what to look at. Run
# from the repository root with bin/evotune built on the development machine.
set -u
O=${OUT:-/tmp/out}/restart; mkdir -p "$O"
exec > >(tee "$O/run.log") 2>&1
echo "commit ${EVOTUNE_COMMIT:-unknown}, $(date -u +%FT%TZ)"; nvidia-smi -L; nvcc --version | tail -1
A=/tmp/restart-archive; rm -rf $A
bin/evotune tune --shape 1x8x512x64 --archive $A --budget 3m --progress-every 30s
python3 - "$A/state.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
print("state:", {k: st[k] for k in st if k.lower() in ("generation", "evals", "restarts", "restart", "stagnant", "epoch")})
print("state keys:", sorted(st))
PY
cp $A/state.json "$O/"; gzip -c $A/results.jsonl > "$O/results.jsonl.gz"; cp $A/meta.json "$O/"
