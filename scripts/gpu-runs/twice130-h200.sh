#!/usr/bin/env bash
# v39 call 5, one H200, bundle from branch exp-twice (trace builds only: the dispatch's sending block runs its route, send
# and mark a second time, stamps 2 -> 9 -> 15 -> 7; its layout twice, 5 -> 8; the combine's reduce twice, 10 -> 8):
# how much of each step of the 1-token chain is its first run (code and data fetched) rather than its work.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
trace() { local r=$1 t=$2 f=$3; shift 3; env "$@" EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $r --tokens $t --format $f --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]'; }
trace 1 1 bf16 EP_X=1 > $OUT/trace-1r-1-bf16-warm.txt
trace 1 1 fp8 EP_X=1 > $OUT/trace-1r-1-fp8-warm.txt
trace 1 1 bf16 EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs > $OUT/trace-1r-1-bf16-inputs.txt
trace 2 1 bf16 EP_X=1 > $OUT/trace-2r-1-bf16-warm.txt
trace 1 32 fp8 EP_X=1 > $OUT/trace-1r-32-fp8-warm.txt
echo "traces done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt
