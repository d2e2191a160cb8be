#!/usr/bin/env bash
# The archive's fixed-layout index on real GPU results (every field of a
# result set: ptxas, accuracy, timings with samples, telemetry), as a user
# meets it: a tune killed with SIGKILL, resumed, then show and export with
# the index and again after deleting it (rebuilt from the log), compared.
# Also the runner's light device tests. Run from the repository root with
# bin/evotune and bin/runner.test built on the development machine.
set -uo pipefail
out=${OUT:-/tmp/out}/index
mkdir -p "$out"
exec > >(tee "$out/run.log") 2>&1
A=/tmp/evotune-index-archive
rm -rf "$A"
echo "commit ${EVOTUNE_COMMIT:-unknown}, $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc --version | tail -n 2

echo "== runner device tests"
(cd runner && ../bin/runner.test -test.run '^TestDevice' -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+\S+_test.go)' | head -60)

echo "== tune, killed with SIGKILL after 45 s"
timeout -s KILL 45 bin/evotune tune --shape 1x8x512x64 --archive "$A" --budget 10m --progress-every 15s
echo "exit $? (137: killed)"
wc -l "$A/results.jsonl"
echo "== resume for a total of 90 s"
bin/evotune tune --shape 1x8x512x64 --archive "$A" --budget 90s --progress-every 30s
echo "exit $?"
ls -la "$A"
bin/evotune show --archive "$A" --format json > "$out/show-index.json"; echo "show exit $?"
bin/evotune export --archive "$A" --out "$out/export-index"; echo "export exit $?"
rm "$A/results.idx"
bin/evotune show --archive "$A" --format json > "$out/show-rebuilt.json" 2> "$out/show-rebuilt.err"; echo "show (no index) exit $?"
cat "$out/show-rebuilt.err"
bin/evotune export --archive "$A" --out "$out/export-rebuilt"; echo "export (no index) exit $?"
cmp "$out/show-index.json" "$out/show-rebuilt.json" && echo "show: identical with the index and rebuilt from the log"
diff -r "$out/export-index" "$out/export-rebuilt" && echo "export: identical with the index and rebuilt from the log"
bin/evotune show --archive "$A" | head -20
cp "$A/meta.json" "$out/"
gzip -c "$A/results.jsonl" > "$out/results.jsonl.gz"
