#!/usr/bin/env bash
# v44 call 2, one H200: . = the multi-kernel copy-out's blocks copying by warps too (ep_dispatch_copy_out through
# ep_copy_message_warps<true>: placed marks and msg_rows) against base/ = 27a9626 (the single-launch dispatch's
# messages by warps). The suite in the four path modes, sanitizers on default soaks (2 ranks sharing the GPU: the
# multi-kernel path past 1 token), reps interleaved at the sizes whose copy-out is ep_dispatch_copy_out, then traces
# with the stamps printed to 10 ns (83aec65) at decode sizes and at 512 tokens.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes copyout
sanitize copyout bf16 memcheck synccheck
sanitize copyout fp8 memcheck
ab 2 "1 256 fp8" "1 512 fp8" "1 1024 fp8" "2 256 fp8" "2 512 bf16" -- a-base:base b-copyout:.
traces copyout:. -- "1 1 bf16" "2 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 512 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
