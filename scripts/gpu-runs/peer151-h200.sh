#!/usr/bin/env bash
# v41 call 5, one H200: . = ba1adf8 (the peer buffers' table held by the lanes from the block's start; the send
# finds a carrying slot's buffer by a shuffle) against base3/ = its parent (v40's kernels as reviewed, with the
# trace's sub-steps). Decode sizes and the prefill send (1024, 4096 tokens); traces of both at 1 token; checks of .
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf peer EP_CUDA_LOG_WAITS=1
ab 2 "1 1 bf16" "2 1 bf16" "1 1 fp8" "2 1 fp8" "1 8 fp8" "2 8 bf16" "1 32 fp8" "1 128 fp8" "2 128 fp8" "1 1024 fp8" "1 4096 bf16" -- a-base3:base3 b-peer:.
mkdir -p /tmp/tr
for nd in base3:base3 peer:.; do d=${nd#*:}
  for rtf in "1 1 bf16" "2 1 bf16"; do set -- $rtf
    EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-${nd%%:*}.txt
  done
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
memcheck peer 2 8 EP_CUDA_LOG_WAITS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
