#!/bin/bash
# Session 3, device run 2: clock64 timeline of the best short configs in a graph of back-to-back launches.
set -u
export PATH=/usr/local/cuda/bin:$PATH
R=/tmp/s3r2; mkdir -p $R
cd devrun/trace
F1="$(cat ../p1x8s4.flags)"
F3="$(echo $F1 | sed 's/SDPA_STAGES=4/SDPA_STAGES=3/')"
nvcc -std=c++17 -arch=sm_90 -O3 $F1 -I. -o /tmp/tr4 main.cu 2>&1 | grep -v -i warn
nvcc -std=c++17 -arch=sm_90 -O3 $F3 -I. -o /tmp/tr3 main.cu 2>&1 | grep -v -i warn
{
echo "== stages=4 1x8x512x64"; /tmp/tr4 1 8 512
echo "== stages=3 1x8x512x64"; /tmp/tr3 1 8 512
echo "== stages=3 2x8x512x64"; /tmp/tr3 2 8 512
echo "== stages=4 2x8x512x64"; /tmp/tr4 2 8 512
} > $R/trace.txt 2>&1
cp $R/* $OUT/
cat $R/trace.txt
