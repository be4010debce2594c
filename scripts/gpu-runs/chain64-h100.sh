#!/usr/bin/env bash
# v31, one H100, one rank alone on the GPU: which early releases of the chained launches pay (HEAD). 256-1024 tokens,
# FP8 and BF16, two reps interleaved: unchained (EP_CUDA_CHAINED_LAUNCH=0), then chained with release masks
# (EP_CUDA_CHAINED_RELEASE, common.cuh: 1 assign, 2 dispatch send, 4 the waits, 8 combine send) 15 (all), 0 (none),
# 14 (no assign), 13 (no send), 11 (no waits), 7 (no combine send).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 ./ep-gpu bench --backend cuda --ranks 1 --tokens $1 --format $2 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
for rep in 1 2; do for t in 256 512 1024; do for f in fp8 bf16; do
  b "$t $f unchained"; (export EP_CUDA_CHAINED_LAUNCH=0; run $t $f)
  for mask in 15 0 14 13 11 7; do b "$t $f mask $mask"; (export EP_CUDA_CHAINED_RELEASE=$mask; run $t $f); done
done; done; done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt
