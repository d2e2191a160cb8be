#!/bin/bash
# Device run (H100 or H200): the sdpa-hopper family through the command line, the steps of
# results/2026-11-26-h100-hopperfam/run.sh (check, d64, d128, causal) with their folders written here.
# From the repository root, with bin/evotune built here (CGO_ENABLED=1): bash results/2026-11-26-hopperfam-cli/run.sh STEP
RESULTS=results/2026-11-26-hopperfam-cli exec bash results/2026-11-26-h100-hopperfam/run.sh "$@"
