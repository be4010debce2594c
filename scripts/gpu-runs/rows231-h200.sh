#!/usr/bin/env bash
# v49 call 6 (one H200): the bench's combine grid from the rows the dispatch produced (rows_received), as a caller's
# combine_async has it, against b091ca2 (base/), whose bench gave the combine the world's most rows (max_recv_rows:
# every block past the rows exits; call 5: 512 tokens FP8 in a world built for 4096, 65 -> 99 us one rank alone).
# Decode (single-launch combine: its grid follows the rows too) and multi-kernel sizes, and three rounds in a world
# built for 4096 tokens.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf new EP_CUDA_LOG_WAITS=1
ab 3 "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 bf16" "1 128 fp8" "2 1 bf16" "2 128 fp8" "1 512 fp8" "1 1024 fp8" "2 512 fp8" "2 1024 bf16" "1 4096 fp8" "2 4096 fp8" "1 512 fp8 --max-tokens 4096" "2 512 fp8 --max-tokens 4096" "2 128 fp8 --max-tokens 4096" -- a-old:base b-new:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
