#!/usr/bin/env bash
# v49 call 2 (one H200), on an experiment commit never committed (every FP8 send that does not overlap in 128-thread
# blocks, in send_threads; c516694's chain_send_threads replaced it). Call 1 read 1024 tokens faster with 128-192, level
# at 512, the overlapped rounds no better. The suite in the four path modes and with every own message placed on that
# build, then 128 against the old 256 and against 160, FP8 at 256-1536 tokens one rank alone, two and four ranks sharing,
# uniform and skewed; then, env only, BF16's ep_dispatch_send (64 registers) where it does not overlap (up to 1023
# tokens) in 128- and 192-thread blocks against its 256.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes new
conf new-own $OWN
ab 3 "1 256 fp8" "1 512 fp8" "1 768 fp8" "1 1024 fp8" "1 1536 fp8" "2 256 fp8" "2 512 fp8" "2 1024 fp8" "2 1536 fp8" "4 512 fp8" "1 1024 fp8 --skewed" "2 1024 fp8 --skewed" -- a-128:. b-256:.,EP_CUDA_SEND_THREADS=256 c-160:.,EP_CUDA_SEND_THREADS=160
ab 2 "1 512 bf16" "1 768 bf16" "2 512 bf16" "2 768 bf16" -- d-def:. e-128:.,EP_CUDA_SEND_THREADS=128 f-192:.,EP_CUDA_SEND_THREADS=192
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
