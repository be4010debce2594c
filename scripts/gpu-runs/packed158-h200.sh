#!/usr/bin/env bash
# v42 call 1, one H200 (2x H200 not lent): . = the message counts carried in the count words, the early
# publish without a fence, against base/ = 43f9e1b; the suite on . with the defaults, every phase single-launch,
# every dispatch overlapped, every dispatch layout-first; memcheck soaks (they also cover 136783f's hold, which
# v41 had not run under memcheck); reps interleaved at decode and 512 tokens.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes packed
sanitize packed fp8 memcheck
(export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000; sanitize packed-single bf16 memcheck)
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 512 fp8" "2 1 bf16" "2 1 fp8" "2 512 fp8" -- a-base:base b-packed:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
