#!/usr/bin/env bash
# v50 call 2 (one H100; no H200 could be started) on e1e1c2d: the dispatch and combine programs joined from kernels/dispatch/ and kernels/combine/
# (PTX byte-identical to 9b647cd's here, compiled by this host's NVRTC from the joined text): the suite in the four path
# modes and marked, memcheck on a default soak, one A/B rep against 9b647cd (base/).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_all split
memcheck default 2 6
ab 1 "1 1 bf16" "1 128 fp8" "2 512 fp8" "1 1024 fp8" "1 4096 fp8" -- a-base:base b-split:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
