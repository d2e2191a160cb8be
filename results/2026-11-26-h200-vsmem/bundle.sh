#!/bin/bash
# Device run: an sdpa-hopper export bundle whose configs take both V paths (v_smem=1 at the short shape, the
# transpose launch at the long one), through examples/device-check.sh (CMake example and PyTorch extension against
# fp32 references on the tuned and five untuned shapes, its time beside evotune bench's).
# From the repository root, bin/evotune built here (CGO_ENABLED=1): bash results/2026-11-26-h200-vsmem/bundle.sh OUT
set -eu
O=$1; mkdir -p $O; A=${TMPDIR:-/tmp}/vsmem-bundle-archive
bin/evotune tune --family sdpa-hopper --dtype fp8 --shape 1x8x512x64 --shape 4x8x2048x64 --budget ${TUNE_BUDGET:-90s} --archive $A > $O/tune.out 2> $O/tune.err
tail -n 16 $O/tune.out
bin/evotune show --archive $A > $O/show.txt 2>&1
ARCHIVE=$A examples/device-check.sh $O/check
