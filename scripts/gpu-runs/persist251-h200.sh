#!/usr/bin/env bash
# v53 call 2 (one H200): the multi-kernel send with fewer blocks than tokens (EP_CUDA_SEND_BLOCKS: each block sends every
# grid-th token and, FP8 and the 4-bit formats, fetches its next row once this one's is encoded, while its stores go
# out; call 1's Nsight Compute view of the FP8 send at 4096 tokens one rank alone: DRAM at 49%, 42% of warp cycles at
# barriers, in the route's loads and the row's wait). base/ = 2580462 (v52). The suite with the defaults, with 3 send
# blocks (every token loop), and 3 blocks layout-first; memcheck and racecheck on a 3-block layout-first FP8 soak; A/B.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
conf head EP_CUDA_LOG_WAITS=1
conf blocks3 EP_CUDA_SEND_BLOCKS=3
conf blocks3-lf EP_CUDA_SEND_BLOCKS=3 $LF
sanitize_with "EP_CUDA_SEND_BLOCKS=3 $LF" blocks3-lf fp8 memcheck racecheck
NO="EP_CUDA_OVERLAP_MIN_TOKENS=0"
ab 2 "1 4096 fp8" "1 2048 fp8" -- a-base:base,$NO b-head:.,$NO c-res:.,$NO,EP_CUDA_SEND_BLOCKS=resident d-base-ovl:base e-head-ovl:.
ab 2 "1 1024 fp8" "1 512 fp8" "1 1024 bf16" "1 4096 mxfp4" -- a-base:base b-head:. c-res:.,EP_CUDA_SEND_BLOCKS=resident
ab 2 "2 1024 fp8" "2 512 fp8" "2 2048 fp8" -- a-base:base b-head:. c-res:.,EP_CUDA_SEND_BLOCKS=resident
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
