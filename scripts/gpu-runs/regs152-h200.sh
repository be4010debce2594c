#!/usr/bin/env bash
# v41 call 6, one H200: . = f9cce89 (the single-launch BF16 kernels send the row through registers, ep_send_token_bf16)
# against base4/ = 55a0c17 (v40's kernels as reviewed, with the trace's sub-steps). BF16 decode sizes, FP8 as a
# control (its path is unchanged); traces of both at 1 token; checks of . with the defaults and with every phase
# single-launch (the BF16 cases of every size through the new send), memcheck and racecheck on BF16 soaks.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf regs EP_CUDA_LOG_WAITS=1
conf regs-single $S EP_CUDA_LOG_WAITS=1
ab 2 "1 1 bf16" "2 1 bf16" "1 8 bf16" "2 8 bf16" "1 32 bf16" "1 128 bf16" "2 128 bf16" "1 1 fp8" -- a-base4:base4 b-regs:.
mkdir -p /tmp/tr
for nd in base4:base4 regs:.; do d=${nd#*:}
  for rtf in "1 1 bf16" "2 1 bf16"; do set -- $rtf
    EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-${nd%%:*}.txt
  done
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
for tool in memcheck racecheck; do
  env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 6 --format bf16 > /tmp/$tool.txt 2>&1
  echo "$tool regs 2r bf16 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
done
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
