#!/usr/bin/env bash
# v41 call 7, one H200: . = the single-launch BF16 send from registers, second form (the row fetched into shared
# memory by cp.async as before; each thread's pieces quieted and stored from registers; the header a word a thread)
# against base4/ = 55a0c17 and regs1/ = f9cce89 (call 6's first form: the row loaded into registers at the token's
# start, slower in the bench). Checks of . as call 6.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf regs2 EP_CUDA_LOG_WAITS=1
conf regs2-single $S EP_CUDA_LOG_WAITS=1
ab 2 "1 1 bf16" "2 1 bf16" "1 8 bf16" "2 8 bf16" "1 32 bf16" "1 128 bf16" "2 128 bf16" -- a-base4:base4 b-regs1:regs1 c-regs2:.
mkdir -p /tmp/tr
for rtf in "1 1 bf16" "2 1 bf16"; do set -- $rtf
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > /tmp/tr/trace-$1r-$2-$3-regs2.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
for tool in memcheck racecheck; do
  env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 6 --format bf16 > /tmp/$tool.txt 2>&1
  echo "$tool regs2 2r bf16 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
done
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
