#!/usr/bin/env bash
# v34 call 6, one H100, main (the per-format single-launch dispatch): traces of one rank alone (every block), 1 token BF16
# and FP8, 128 tokens BF16 and FP8: where FP8's extra time goes.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
for tf in "1 bf16" "1 fp8" "128 bf16" "128 fp8"; do set -- $tf
  EP_CUDA_TRACE=all timeout 120 ./ep-gpu bench --backend cuda --ranks 1 --tokens $1 --format $2 --passes 1 --rounds 40 > $OUT/trace-1r-$1-$2.txt 2>&1; echo "trace 1r $1 $2 rc=$?" >> $OUT/rc.txt
done
cat $OUT/rc.txt
