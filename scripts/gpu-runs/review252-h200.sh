#!/usr/bin/env bash
# v53 review, call 3 (one H200; 2x H200 not lent): the review's host changes. One `CudaComm::launch` with a `Chain` for the
# three launch wrappers (PTX identical), the switches read through `setting_from_env`, and one `PhaseClock` for the three
# places that timed a phase by events or by stamps (ours, NCCL's, the floors'). The suite with the defaults, every phase
# single-launch and the late-inputs hook; memcheck on a 2-rank soak; timings under both conventions, with the first
# kernels chained and plain, NCCL's (one rank) and the floors (two ranks), a probed breakdown (the async parts' events).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
conf review
conf review-single $S
conf review-late EP_CUDA_LATE_INPUTS=20000
memcheck review-2r 2 6
ab 2 "1 1 bf16" "1 128 fp8" "1 1 bf16 --timing step" "1 128 fp8 --timing step" -- a-head:. b-plainfirst:.,EP_CUDA_CHAINED_FIRST=0
fl() { local label=$1; shift; echo "== $label" >> $OUT/bench.txt
  timeout 120 ./ep-gpu bench --backend cuda --passes 1 "$@" 2>&1 | grep -E '^ceiling|^floor|^t[0-9]|rror' >> $OUT/bench.txt; echo "$label rc=$? $(elapsed)" >> $OUT/rc.txt; }
fl floors-2r-events --ranks 2 --tokens 1
fl floors-2r-step --ranks 2 --tokens 1 --timing step
fl nccl-1r-events --ranks 1 --tokens 128 --format fp8
fl nccl-1r-step --ranks 1 --tokens 128 --format fp8 --timing step
fl breakdown-1r --ranks 1 --tokens 512 --format fp8 --breakdown
fl breakdown-1r-t1 --ranks 1 --tokens 1 --breakdown
cat $OUT/rc.txt
cat $OUT/bench.txt
summary | tee $OUT/summary.txt
