#!/usr/bin/env bash
# v47 call 1 (one H200; 2x H200 not lent): where the multi-kernel dispatch's time goes at 256-1024 tokens FP8 (the
# sweep's 512 and 1024 FP8 dispatches are 0.92x / 0.98x NCCL on 2x H200): breakdowns, grid traces (10 rounds, rank 0),
# and the layout-first chain (default from 512 on a rank with its own GPU, measured on one H100 only) against the
# assign-send-wait-copy chain, and the single-launch dispatch at 256.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
for sc in "1 256 fp8" "1 512 fp8" "1 1024 fp8" "2 512 fp8" "1 512 bf16"; do
  set -- $sc
  echo "== breakdown $sc" >> $OUT/breakdown.txt
  timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/breakdown.txt
done
echo "breakdowns $(elapsed)" >> $OUT/rc.txt
mkdir -p /tmp/tr
for sc in "1 512 fp8" "1 1024 fp8" "2 512 fp8"; do
  set -- $sc
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-$1r-$2-$3.txt
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 10 2>&1 | grep -E '^trace|^t[0-9]|rror' > /tmp/tr/grid-$1r-$2-$3-nolf.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces $(elapsed)" >> $OUT/rc.txt
ab 2 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "1 512 bf16" -- a-def:. b-nolf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0 c-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=100000
ab 2 "2 512 fp8" "2 1024 fp8" -- a-def:. d-lf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
