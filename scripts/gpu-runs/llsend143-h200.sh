#!/usr/bin/env bash
# v40 call 6, one H200: llsend/ = 50b1844 (the LL single-launch combine sends a row after one round of loads) against
# . = 14029b0. The LL combine runs at 1-8 tokens; 32 tokens (the marked combine, unchanged) as a control. Checks of
# llsend/: every world, memcheck on a 2-rank soak (1-64 tokens a round).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
D=llsend conf llsend EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-llsend.txt $OUT/conformance-llsend.txt
for rep in 1 2; do
  for rtf in "1 1 bf16" "1 1 fp8" "1 8 fp8" "2 1 bf16" "2 1 fp8" "2 8 bf16" "2 32 fp8"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F a-fix"; run .
    b "${R}r $T $F b-llsend"; run llsend
  done
done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
env EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 llsend/ep-gpu soak --backend cuda --ranks 2 --rounds 10 > /tmp/memcheck.txt 2>&1
echo "memcheck llsend 2r rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/memcheck.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
