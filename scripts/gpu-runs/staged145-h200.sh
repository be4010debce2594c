#!/usr/bin/env bash
# v40 call 8, one H200: staged/ = the LL combine's reduce in one round of loads (ep_reduce_token_ll_staged) against
# . = daa2b18's kernels. The LL combine runs at 1-8 tokens; 32 tokens as a control. Checks of staged/: every world,
# memcheck and racecheck on a 2-rank soak.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
D=staged conf staged EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-staged.txt $OUT/conformance-staged.txt
ab 2 "1 1 bf16" "1 1 fp8" "1 8 fp8" "2 1 bf16" "2 1 fp8" "2 8 bf16" "2 32 fp8" -- a-head:. b-staged:staged
for tool in memcheck racecheck; do
  env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 staged/ep-gpu soak --backend cuda --ranks 2 --rounds 6 > /tmp/$tool.txt 2>&1
  echo "$tool staged 2r rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
done
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
