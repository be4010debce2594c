#!/usr/bin/env bash
# v40 call 3, one H200: the padding fix where it changes the deal on one GPU. Two ranks sharing the GPU get 32 sending
# blocks each; from 9 to 31 tokens (not spread) t of them send, so base/ (4eeb3f6) pads over the 32 - t others (one
# block at 31 tokens) and . (14029b0) over all 32 once t > 16. FP8 (4 rows a group), reps interleaved; BF16 (no
# padding) and 128 tokens (all busy: unchanged deal) as controls; traces of both at 28 tokens FP8.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
for rep in 1 2; do
  for rtf in "2 31 fp8" "2 28 fp8" "2 24 fp8" "2 16 fp8" "2 12 fp8" "2 1 fp8" "2 128 fp8" "2 28 bf16"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base
    b "${R}r $T $F b-fix"; run .
  done
done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
for nd in fix:. base:base; do d=${nd#*:}
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $d/ep-gpu bench --backend cuda --ranks 2 --tokens 28 --format fp8 --passes 1 --rounds 40 2>&1 | grep -E '^trace (dispatch|gate)|^t[0-9]|rror' > $OUT/trace-28-fp8-${nd%%:*}.txt
done
echo "traces done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
