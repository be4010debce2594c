#!/usr/bin/env bash
# v21 call 1. base/ = main (fdc0df0: the comm.rs split, host-only, first time on a GPU): its suites.
# ./ = branch v21-marked-combine (6348b1c, first time on a GPU): try21-h200.sh (suites every way
# the marked path is reached, soak, sanitizers, A/B against base/ at prefill sizes).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
: > $OUT/main.txt
msuite() { local name=$1; shift; env "$@" timeout 100 base/ep-gpu conformance --backend cuda > /tmp/logs/main-conformance-$name.txt 2>&1; echo "main conf $name rc=$? $(tail -n 1 /tmp/logs/main-conformance-$name.txt)" >> $OUT/main.txt; }
msuite run1 X=1
msuite all-overlapped EP_CUDA_OVERLAP_MIN_TOKENS=1
msuite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
cat $OUT/main.txt
bash ./try21-h200.sh
