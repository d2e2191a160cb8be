#!/bin/bash
# Writes bin/jobs.txt, the device call's job list (device.sh runs it: T=520 bash bin/devrun.sh).
# N: the new defaults; NB0: the same with whole generations (--batch 0); OLD: the defaults before.
: > bin/jobs.txt
for f in runner/testdata/replay/*.jsonl.gz; do for r in 0 1 2 3 4 5 6 7 8 9; do first=$((r*10+1))
  echo "N|rp|$f|$first|10|" >> bin/jobs.txt
  echo "NB0|rp|$f|$first|10|--batch 0" >> bin/jobs.txt
  echo "OLD|rp|$f|$first|10|--batch 0 --tournament 3 --screen 8" >> bin/jobs.txt
done; done
for f in runner/testdata/ktcache/heldout/GEMM*.json.gz runner/testdata/ktcache/GEMM_A100.json.gz; do
  for first in 1 26 51 76; do echo "N|kt|$f|$first|25|" >> bin/jobs.txt; done; done
for f in runner/testdata/ktcache/heldout/[cp]*.json.gz runner/testdata/ktcache/convolution_A100.json.gz; do
  for first in 1 51; do echo "N|kt|$f|$first|50|" >> bin/jobs.txt; done; done
