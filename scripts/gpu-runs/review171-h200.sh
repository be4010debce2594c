#!/usr/bin/env bash
# v43 review, call 6, one H200: . = the review (Spread's hold word loaded once, when the row is in, where v43 loaded it
# at the send's start and again there; the copy-out's walk wholly in 32 bits; combine stamp 10 gone) against base/ =
# a09ae2e (v43 as submitted). The suite in the four path modes, memcheck and racecheck soaks, a 3-rank single-launch
# soak; reps interleaved at decode sizes and at 1024 tokens (the overlapped copy-out's claimed walk); traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf review EP_CUDA_LOG_WAITS=1
conf review-single $S
conf review-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1
conf review-layout EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
sanitize review bf16 memcheck racecheck
env $S timeout 120 ./ep-gpu soak --backend cuda --ranks 3 --rounds 100 --format fp8 > /tmp/soak3.txt 2>&1
echo "soak 3r fp8 single-launch rc=$? $(tail -n 1 /tmp/soak3.txt)" >> $OUT/rc.txt
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" "1 1024 bf16" -- a-v43:base b-review:.
traces v43:base review:. -- "1 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
