#!/usr/bin/env bash
# v40 call 2 on one H200 (2x H200 withdrawn between calls 1 and 2): . = 14029b0 (the padding over every block when
# most sent, groups fastest) against base/ = 4eeb3f6 and warp/ = exp-warp-copy (a message a warp when not spread).
# One rank alone is the one-GPU shape where most blocks send at 128 tokens (two ranks sharing the GPU get 32
# senders each, all busy, so their padding was already everywhere). Checks of . and warp/; a trace of . and base/.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf fix EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-fix.txt $OUT/conformance.txt
env EP_CUDA_LOG_WAITS=1 timeout 150 warp/ep-gpu conformance --backend cuda > /tmp/conformance-warp.txt 2>&1
echo "conf warp rc=$? $(elapsed) $(tail -n 1 /tmp/conformance-warp.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' /tmp/conformance-warp.txt | head -20 >> $OUT/rc.txt
for rep in 1 2; do
  for rtf in "1 128 fp8" "1 128 bf16" "1 64 fp8" "1 32 fp8" "1 1 fp8" "2 128 fp8"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base
    b "${R}r $T $F b-fix"; run .
    b "${R}r $T $F c-warp"; run warp
  done
done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
for nd in fix:. base:base; do d=${nd#*:}
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks 1 --tokens 128 --format fp8 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > $OUT/trace-128-fp8-${nd%%:*}.txt
done
env EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > /tmp/memcheck-fp8.txt 2>&1
echo "memcheck fix 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/memcheck-fp8.txt | tr '\n' ' ')" >> $OUT/rc.txt
echo "checks done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
