#!/usr/bin/env bash
# examples/device-check.sh: on a GPU machine with nvcc and PyTorch, prove that
# an export bundle works in a user's build: export it, build both examples
# against it, check them against PyTorch's SDPA in fp32 on the tuned shapes
# and on shapes nobody tuned (odd B and H, S = 1, 77, 1000) with a softmax
# scale that is not 1/sqrt(D), and time the exported kernel beside PyTorch's
# flash and cuDNN backends and beside evotune bench, all in one run.
#
#   examples/device-check.sh [OUT]          (default OUT: results/DATE-GPU-bundle)
#
# By default it first tunes a small archive on this GPU (TUNE_EVALS configs
# of the two mission shapes in DTYPE, default fp16, with the kernel source
# this evotune embeds), so that the bundle, the bench and the examples all
# run the same source.
# ARCHIVE=DIR (and KERNEL_SOURCE=PATH when the archive measured another
# source than this evotune embeds) exports an existing archive instead;
# evotune bench then runs only when the sources agree.
#
# Needs: bin/evotune (or Go to build it), nvcc, python3 with torch, a GPU;
# cmake is used when present, else nvcc builds the CMake example's sources.
# Writes OUT/README.md (the table, with GPU, date, commit and command) and
# every log beside it. Exits non-zero when any check fails.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
say() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'device-check: %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null || die "no nvidia-smi: this needs a GPU machine"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
SM=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
[[ $SM =~ ^[0-9]+$ ]] || die "cannot read the compute capability ($SM)"
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[[ -x $NVCC ]] || die "no nvcc (set NVCC)"
PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import torch; assert torch.cuda.is_available()' || die "$PYTHON has no PyTorch with CUDA"

DATE=$(date -u +%Y-%m-%d)
SLUG=$(echo "$GPU" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/-$//')
OUT=${1:-results/$DATE-$SLUG-bundle}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
COMMIT=${EVOTUNE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export EVOTUNE_COMMIT=$COMMIT
COMMAND="${DTYPE:+DTYPE=$DTYPE }${TUNE_EVALS:+TUNE_EVALS=$TUNE_EVALS }examples/device-check.sh $*"

EVOTUNE=${EVOTUNE:-bin/evotune}
if [[ ! -x $EVOTUNE ]]; then
	command -v go >/dev/null || die "no $EVOTUNE and no Go to build it (make build)"
	say "building $EVOTUNE"
	make build BIN="$EVOTUNE" >&2
fi

TUNED="1x8x512,2x8x512"
BENCH=yes
if [[ -z ${ARCHIVE:-} ]]; then
	ARCHIVE=$OUT/archive
	TUNE_EVALS=${TUNE_EVALS:-60}
	say "tuning $TUNE_EVALS ${DTYPE:-fp16} configs of 1x8x512x64 and 2x8x512x64 into $ARCHIVE"
	"$EVOTUNE" tune --shape 1x8x512x64 --shape 2x8x512x64 --dtype "${DTYPE:-fp16}" --evals "$TUNE_EVALS" --archive "$ARCHIVE" --quiet \
		> "$OUT/tune.log" 2>&1 || die "tune failed: $OUT/tune.log"
else
	# The tuned shapes are the archive's.
	TUNED=$("$PYTHON" -c 'import json,sys; print(",".join("%(b)dx%(h)dx%(s)d" % s for s in json.load(open(sys.argv[1]))["problem"]["shapes"]))' "$ARCHIVE/meta.json")
fi

BUNDLE=$OUT/third_party/attention
say "exporting $ARCHIVE to $BUNDLE"
rm -rf "$BUNDLE"
"$EVOTUNE" export --archive "$ARCHIVE" --name attention --to "$BUNDLE" ${KERNEL_SOURCE:+--kernel-source "$KERNEL_SOURCE"} \
	| tee "$OUT/export.log" >&2
[[ -f $BUNDLE/attention_launch.cu ]] || die "export wrote no launcher (see $OUT/export.log)"
if [[ -n ${KERNEL_SOURCE:-} ]]; then
	BENCH="no: the archive measured another kernel source than this evotune embeds, so evotune bench would time a different kernel"
fi

# A bundle whose configs run Hopper's wgmma builds for sm_90a only.
if grep -q '^#define ATTENTION_SM90A 1' "$BUNDLE/attention_launch.h"; then
	SM=${SM}a
fi

status=0
SCALE=$("$PYTHON" -c 'import math; print(0.7 / math.sqrt(int(open("'"$BUNDLE"'/attention_launch.h").read().split("#define ATTENTION_HEAD_DIM ")[1].split()[0])))')

say "CMake example"
if command -v cmake >/dev/null; then
	cmake -S examples/cmake -B "$OUT/build" -DATTENTION_BUNDLE="$BUNDLE" -DCMAKE_CUDA_ARCHITECTURES="$SM" \
		-DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1 || die "cmake failed: $OUT/cmake.log"
	cmake --build "$OUT/build" -j >> "$OUT/cmake.log" 2>&1 || die "the CMake build failed: $OUT/cmake.log"
	TEST_BIN=$OUT/build/attention_test
	BUILT_WITH="cmake $(cmake --version | head -n 1 | awk '{print $3}')"
else
	TEST_BIN=$OUT/attention_test
	ARCHFLAG=-arch=sm_$SM
	[[ $SM == *a ]] && ARCHFLAG=-gencode=arch=compute_$SM,code=sm_$SM # -arch=sm_90a adds a compute_90 pass
	"$NVCC" -std=c++17 -O3 "$ARCHFLAG" -I "$BUNDLE" -o "$TEST_BIN" "$BUNDLE/attention_launch.cu" examples/cmake/attention_test.cu \
		> "$OUT/cmake.log" 2>&1 || die "building the CMake example's sources with nvcc failed: $OUT/cmake.log"
	BUILT_WITH="nvcc (no cmake here)"
fi
SHAPES=$(echo "$TUNED,3x5x77,1x1x1,2x3x1000,5x7x77,1x3x1000" | tr ',' ' ')
# shellcheck disable=SC2086
if ! "$TEST_BIN" --scale "$SCALE" $SHAPES > "$OUT/attention_test.md" 2>&1; then
	status=1
	echo "device-check: attention_test FAILED (see $OUT/attention_test.md)" >&2
fi
cat "$OUT/attention_test.md" >&2

say "PyTorch extension"
if ! "$PYTHON" examples/torch/check.py --bundle "$BUNDLE" --tuned "$TUNED" --scale "$SCALE" --out "$OUT/torch.md" \
	--json-out "$OUT/torch.json" 2> "$OUT/torch.log"; then
	status=1
	echo "device-check: the PyTorch extension check FAILED (see $OUT/torch.log)" >&2
fi

BENCH_MD="not run ($BENCH)"
AGREE=""
if [[ $BENCH == yes ]]; then
	say "evotune bench of the same archive"
	if "$EVOTUNE" bench --archive "$ARCHIVE" --out "$OUT/bench" > "$OUT/bench.log" 2>&1; then
		BENCH_MD=$(cat "$OUT/bench/bench.md")
		# The bundle's ratio to cuDNN beside the bench's, shape by shape:
		# the same kernel, timed the same way, should agree within a few
		# percent (reported, not gated: both are measurements).
		AGREE=$("$PYTHON" - "$OUT/torch.json" "$OUT/bench/bench.json" <<'PY' || true
import json, sys
ours = {r["shape"]: r for r in json.load(open(sys.argv[1]))["rows"]}
print("| shape | bundle / cuDNN (extension) | ours / cuDNN (evotune bench) | difference |")
print("|---|---|---|---|")
for row in json.load(open(sys.argv[2]))["rows"]:
    o = ours.get(row["shape"], {})
    a = o.get("ours_us", 0) / o["cudnn_us"] if o.get("cudnn_us") else 0
    b = row.get("ours_over_cudnn", 0)
    diff = f"{(a / b - 1) * 100:+.1f}%" if a and b else "n/a"
    print(f"| {row['shape']} | {a:.3f} | {b:.3f} | {diff} |" if a and b else f"| {row['shape']} | n/a | n/a | n/a |")
PY
)
	else
		status=1
		BENCH_MD="failed: see bench.log"
		echo "device-check: evotune bench failed (see $OUT/bench.log)" >&2
	fi
fi

{
	echo "# The export bundle in a user's build, checked and timed on the GPU"
	echo
	echo "- GPU: $GPU (sm_$SM)"
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- commit: $COMMIT"
	echo "- command: \`$COMMAND\` (ARCHIVE=${ARCHIVE#"$ROOT"/} KERNEL_SOURCE=${KERNEL_SOURCE:-none})"
	echo "- nvcc: $("$NVCC" --version | tail -n 1); PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
	echo "- CMake example built with $BUILT_WITH; the PyTorch extension with torch.utils.cpp_extension.load"
	echo "- result: $([[ $status == 0 ]] && echo "every check passed" || echo "FAILED")"
	echo
	echo "## PyTorch extension against PyTorch SDPA (fp32 math), beside flash and cuDNN"
	echo
	cat "$OUT/torch.md" 2>/dev/null || echo "(no table: see torch.log)"
	echo
	echo "## CMake example against a host fp32 reference"
	echo
	cat "$OUT/attention_test.md"
	echo
	echo "## evotune bench of the same archive, in the same run"
	echo
	if [[ -n $AGREE ]]; then
		echo "The bundle's ratio to cuDNN (PyTorch extension, CUDA-graph replay) beside evotune bench's for the same config:"
		echo
		echo "$AGREE"
		echo
	fi
	echo "$BENCH_MD" | sed 's/^# /### /'
} > "$OUT/README.md"
say "wrote $OUT/README.md"
[[ $status == 0 ]] && echo "device-check: every check passed" >&2 || echo "device-check: FAILED" >&2
exit "$status"
