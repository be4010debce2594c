#!/usr/bin/env bash
# v40, for 2x H200 when lent again (refused after call 1): . = v40's kernels (14029b0, the single-launch dispatch's
# padding over every block when most sent, groups fastest in the items; 50b1844, the LL combine's send after one
# round of loads; ba6456e, the counts' read report relaxed; 6455b69, the LL reduce in one round; 240c0f1, the review) against base/ = 4eeb3f6 (v39 as reviewed), reps interleaved at the decode sizes (128 tokens FP8:
# 3 padding blocks in base; 1-8 tokens: the LL combine); checks; a trace of . at 128 tokens FP8; the sweep of .
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf v40 EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-v40.txt $OUT/conformance.txt
ab 2 "2 128 fp8" "2 96 fp8" "2 128 bf16" "2 64 fp8" "2 32 fp8" "2 8 fp8" "2 1 fp8" "2 1 bf16" -- a-base:base b-v40:.
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 128 --format fp8 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > $OUT/trace-128-fp8.txt
env EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > /tmp/memcheck-fp8.txt 2>&1
echo "memcheck v40 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/memcheck-fp8.txt | tr '\n' ' ')" >> $OUT/rc.txt
echo "checks done $(elapsed)" >> $OUT/rc.txt
timeout 200 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$? $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
