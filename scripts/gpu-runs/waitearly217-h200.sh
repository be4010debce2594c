#!/usr/bin/env bash
# (EP_X_WAIT_EARLY was a knob of the experiment build this call ran, never committed; 0ded2a3 is its default.)
# v48 call 5 (one H200): an overlapped round's layout wait launched beside the assign (forked before it) instead of
# after it, where call 4's traces put the copy stream's first block ~25 us after the send grid's first (the wait's
# block had no SM until send blocks retired, so ~half the send blocks at 2048 tokens one rank alone missed the layout
# and sent their own message for the copy-out). EP_X_WAIT_EARLY=0: the wait after the assign, as before.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf new EP_CUDA_LOG_WAITS=1
conf new-overlap EP_CUDA_OVERLAP_MIN_TOKENS=1
conf new-own $OWN
mkdir -p /tmp/tr
for v in old:0 new:1; do
  EP_X_WAIT_EARLY=${v#*:} EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 1 --tokens 2048 --format fp8 --passes 1 --rounds 12 2>&1 | grep -E '^trace|^t[0-9]|rror|dropped' > /tmp/tr/trace-1r-2048-fp8-$v.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces $(elapsed)" >> $OUT/rc.txt
ab 2 "1 2048 fp8" "1 4096 fp8" "2 2048 fp8" "2 4096 fp8" "1 1024 bf16" "1 2048 bf16" "1 4096 bf16" "2 4096 bf16" -- a-old:.,EP_X_WAIT_EARLY=0 b-new:. c-new-allfmt:.,EP_CUDA_SEND_FP8=0
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
