#!/usr/bin/env bash
# v42 call 2, one H200: . = the counts polled and the groups laid out in one pass (ep_poll_layout) against
# base/ = 6e00a8d (the packed counts, as committed: the kernels' parameter lists without nmsg_ptrs); the suite on .
# with the defaults, every phase single-launch, every dispatch overlapped, every dispatch layout-first; memcheck and
# racecheck on 2-rank soaks; reps interleaved; the single-launch dispatch at 256 and 512 tokens one rank alone
# (thresholds: v30 measured it slower there on 2x H200); traces of . at 1 token.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes fused
(export EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000; sanitize fused-single fp8 memcheck racecheck)
sanitize fused bf16 memcheck racecheck
ab 2 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 256 fp8" "1 512 fp8" "2 1 bf16" "2 1 fp8" "2 128 fp8" "2 512 fp8" -- a-base:base b-fused:.
for rep in 1 2; do for T in 256 512; do
  R=1 F=fp8; b "1r $T fp8 c-fused-single"; run . EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000
done; done
traces fused:. -- "1 1 bf16" "2 1 bf16" "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
