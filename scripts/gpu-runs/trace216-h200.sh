#!/usr/bin/env bash
# v48 calls 3 and 4 (one H200; call 3 grepped the send records away, fixed for call 4): grid traces of one rank alone at 2048 tokens FP8 (overlapped), ep_dispatch_send_fp8 against
# ep_dispatch_send (EP_CUDA_SEND_FP8=0): call 2's p50 read 88.0-103.6 us across runs with the FP8 kernel (97 without),
# p95 to 114. Which rounds are slow, and whether their send blocks found the layout (stamp 3: own rows written).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
mkdir -p /tmp/tr
for rep in 1 2; do for v in all:0 fp8:1; do
  EP_CUDA_SEND_FP8=${v#*:} EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 1 --tokens 2048 --format fp8 --passes 1 --rounds 12 2>&1 | grep -E '^trace|^t[0-9]|rror|dropped' > /tmp/tr/trace-1r-2048-fp8-${v%%:*}-$rep.txt
  echo "trace ${v%%:*} $rep $(elapsed) $(grep -c . /tmp/tr/trace-1r-2048-fp8-${v%%:*}-$rep.txt) lines $(grep '^t[0-9]' /tmp/tr/trace-1r-2048-fp8-${v%%:*}-$rep.txt)" >> $OUT/rc.txt
done; done
tar czf $OUT/traces.tgz -C /tmp/tr .
cat $OUT/rc.txt
