#!/usr/bin/env bash
# (EP_X_COPY_EARLY was a knob of the experiment build this call ran, never committed; not landed.)
# v48 call 6 (one H200): with the layout wait beside the assign (call 5), the overlapped copy-out's grid launched
# before the assign too (EP_X_COPY_EARLY=1; high priority, so its blocks hold their share of the SMs before the send
# grid fills them) against after it (call 5's traces: its first block 23 us after the send's first). Two ranks sharing
# the GPU are the rounds where the copy-out has the peer's messages to copy beside the send.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf early-overlap EP_X_COPY_EARLY=1 EP_CUDA_OVERLAP_MIN_TOKENS=1
conf early EP_X_COPY_EARLY=1 EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/tr
for v in after:0 before:1; do
  EP_X_COPY_EARLY=${v#*:} EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 2 --tokens 2048 --format fp8 --passes 1 --rounds 8 2>&1 | grep -E '^trace|^t[0-9]|rror|dropped' > /tmp/tr/trace-2r-2048-fp8-${v%%:*}.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces $(elapsed)" >> $OUT/rc.txt
ab 3 "1 2048 fp8" "1 4096 fp8" "2 2048 fp8" "2 4096 fp8" "2 1024 bf16" "2 4096 bf16" "1 4096 bf16" -- a-after:. b-before:.,EP_X_COPY_EARLY=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
