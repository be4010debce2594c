#!/usr/bin/env bash
# v41 call 1, one H200 (2x H200 not lent): base/ = 976af12 (v40 as reviewed, with the trace's sub-steps 16-30),
# v1/ = 94a962e (the peer buffers' table prefetched into L1), . = v1 + the message counts' load overlapping the
# layout. Decode sizes one rank alone and two ranks sharing the GPU; traces with the sub-steps of base and .;
# checks of . (every world, memcheck).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf v2 EP_CUDA_LOG_WAITS=1
ab 2 "1 1 bf16" "2 1 bf16" "1 1 fp8" "2 1 fp8" "1 8 fp8" "2 32 fp8" "1 128 fp8" -- a-base:base b-v1:v1 c-v2:.
mkdir -p /tmp/tr
for nd in base:base v2:.; do d=${nd#*:}
  for rtf in "1 1 bf16" "2 1 bf16" "1 1 fp8" "2 1 fp8" "1 128 fp8"; do set -- $rtf
    EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|combine|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-${nd%%:*}.txt
  done
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
memcheck v2 2 8 EP_CUDA_LOG_WAITS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
