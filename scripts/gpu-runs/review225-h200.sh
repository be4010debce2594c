#!/usr/bin/env bash
# v48 review call 13 (one H200), on 564a054 (the review of v46-v48; one-node kernels' machine code 0ded2a3's): the suite
# in the four path modes and with every own message placed, memcheck on an overlapped FP8 soak, and one A/B rep of the
# prefill FP8 sizes against v47 (0cd29bf in base/) as submitted.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes final
conf final-own $OWN
sanitize_with "EP_CUDA_OVERLAP_MIN_TOKENS=1" overlapped fp8 memcheck
ab 1 "1 1024 fp8" "1 4096 fp8" "2 4096 fp8" -- a-v47:base b-final:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
