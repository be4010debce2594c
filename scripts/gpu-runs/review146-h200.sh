#!/usr/bin/env bash
# v40 review call 9, one H200: review/ = the review's kernels (the busy rule in the caller, the LL row send and
# address shared, the staged reduce's arguments) against staged/ = 6455b69 (v40 as it was). 24-28 tokens FP8 with two
# ranks sharing the GPU is where the busy rule's walk changes; the LL combine at 1-8 tokens; checks of review/.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
D=review conf review EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-review.txt $OUT/conformance-review.txt
ab 2 "2 28 fp8" "2 24 fp8" "1 1 bf16" "1 8 fp8" "2 1 bf16" "1 128 fp8" -- a-staged:staged b-review:review
for tool in memcheck racecheck; do
  env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 review/ep-gpu soak --backend cuda --ranks 2 --rounds 6 --format fp8 > /tmp/$tool.txt 2>&1
  echo "$tool review 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
done
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
