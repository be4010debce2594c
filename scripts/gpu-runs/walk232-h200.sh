#!/usr/bin/env bash
# v49 call 7 (one H200), on an experiment build of 50cd097 (not landed; EP_CUDA_COPY_OUT_BLOCKS was that build's
# knob): ep_dispatch_copy_out's message blocks capped at twice what the rank's share of the SMs holds
# (COPY_OUT_WAVES), walking the messages past that (ep_copy_messages), against 50cd097 (base/: a block per possible
# message, n_ranks * max_tokens). The suite in the four path modes, and with every copy-out walking in one block or
# seven (EP_CUDA_COPY_OUT_BLOCKS, chain and layout-first), memcheck on walking soaks; then the A/B, in worlds built for
# the rounds' tokens and for 4096 (ep bench --max-tokens).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes new
conf walk1-chain EP_CUDA_COPY_OUT_BLOCKS=1 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
conf walk7-layout EP_CUDA_COPY_OUT_BLOCKS=7 $LF
sanitize_with "EP_CUDA_COPY_OUT_BLOCKS=3 $LF" walk3-lf fp8 memcheck racecheck
sanitize_with "EP_CUDA_COPY_OUT_BLOCKS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0" walk1 bf16 memcheck
ab 3 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "1 1536 fp8" "2 512 fp8" "2 1024 fp8" "2 1536 fp8" "1 768 bf16" "4 512 fp8" "1 256 bf16 --max-tokens 4096" "1 512 fp8 --max-tokens 4096" "1 1024 fp8 --max-tokens 4096" "2 512 fp8 --max-tokens 4096" "2 128 fp8 --max-tokens 4096" -- a-base:base b-new:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
