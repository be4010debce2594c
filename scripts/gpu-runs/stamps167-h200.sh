#!/usr/bin/env bash
# v43 call 2, one H200 (call 1 ran on one H100: no H200 could be started then): . = the Spread hold's word reloaded once the row is in, with
# trace-only stamps (dispatch: 24 the copy-out's walk begun, 25 a mark's first poll issued, 30 now after it returned;
# combine: 8 thread 0's first LL piece there at once, 9 the first round staged); red/ = . with each block's report that
# it read the counts made by its last thread instead of thread 0; base/ = ce836e0 (v42 as reviewed). The suite on .
# and red/ (default, single-launch), memcheck and racecheck soaks of .; reps interleaved at decode sizes; traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf hold EP_CUDA_LOG_WAITS=1
conf hold-single $S
D=red conf red
D=red conf red-single $S
sanitize hold bf16 memcheck racecheck
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" "1 128 fp8" -- a-base:base c-hold:. e-red:red
traces hold:. red:red -- "1 1 bf16" "2 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
