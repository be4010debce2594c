#!/usr/bin/env bash
# v49 call 11 (one H200): ep_dispatch_copy_out's message blocks per sender (copy_out_per_sender: max_tokens in a world
# built for the round, as the sweep runs; the round's tokens, at least the resident blocks divided among the senders,
# in one built for more), each block looping over every per_sender-th message of its sender, the kernel held to 48
# registers (__launch_bounds__(128, 10)), against ee0f1a5 (base/: a block per possible message). The suite in the four
# path modes, with the loop forced (EP_CUDA_COPY_OUT_PER_SENDER=1 and 3, chain and layout-first), memcheck and
# racecheck on looping soaks; then the A/B in worlds built for the rounds and for 4096 tokens.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes new
conf ps1-chain EP_CUDA_COPY_OUT_PER_SENDER=1 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
conf ps3-layout EP_CUDA_COPY_OUT_PER_SENDER=3 $LF
sanitize_with "EP_CUDA_COPY_OUT_PER_SENDER=2 $LF" ps2-lf fp8 memcheck racecheck
sanitize_with "EP_CUDA_COPY_OUT_PER_SENDER=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0" ps1 bf16 memcheck
ab 3 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "2 512 fp8" "2 1024 fp8" "2 1536 fp8" "4 512 fp8" "1 768 bf16" "1 512 fp8 --max-tokens 4096" "1 1024 fp8 --max-tokens 4096" "2 512 fp8 --max-tokens 4096" "2 128 fp8 --max-tokens 4096" "1 256 bf16 --max-tokens 4096" -- a-base:base b-new:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
