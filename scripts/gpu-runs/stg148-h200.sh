#!/usr/bin/env bash
# v41 call 2, one H200: . = 45ea156 (ep_copy_to's stores as global stores, STG, not generic ST.E) against
# base2/ = a868174 (v41 call 1's kernels: the table prefetch and the message counts beside the layout; the trace's
# stamps now SM clocks). Traces of both with the sub-steps; checks of . (every world, memcheck).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
conf stg EP_CUDA_LOG_WAITS=1
ab 2 "1 1 bf16" "2 1 bf16" "1 1 fp8" "2 1 fp8" "1 8 fp8" "1 128 fp8" "1 128 bf16" "2 128 fp8" "1 1024 fp8" -- a-base2:base2 b-stg:.
mkdir -p /tmp/tr
for nd in base2:base2 stg:.; do d=${nd#*:}
  for rtf in "1 1 bf16" "2 1 bf16" "1 1 fp8" "1 128 fp8"; do set -- $rtf
    EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|combine|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-${nd%%:*}.txt
  done
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
memcheck stg 2 8 EP_CUDA_LOG_WAITS=1
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
