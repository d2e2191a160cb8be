#!/bin/bash
# Session 3, device run 8: timeline of the best 1x8x512x64 config as is, without compute (loads only), and without loads past tile 0 (compute only).
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r8; mkdir -p $R
cd devrun/trace
F1="$(cat ../p1x8s4.flags)"
for m in 0 1 2; do nvcc -std=c++17 -arch=sm_90 -O3 $F1 -DTRACE_MODE=$m -I. -o /tmp/tr$m main.cu 2>&1 | grep -v -i warn; done
{
for m in 0 1 2; do echo "== mode $m (0 as is, 1 no compute, 2 loads of tile 0 only) stages=4 1x8x512x64"; /tmp/tr$m 1 8 512; done
for m in 0 1 2; do echo "== mode $m stages=4 2x8x512x64"; /tmp/tr$m 2 8 512; done
} > $R/trace-modes.txt 2>&1
cp $R/* $OUT/
cat $R/trace-modes.txt
