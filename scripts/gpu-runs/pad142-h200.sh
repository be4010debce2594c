#!/usr/bin/env bash
# v40 call 5, one H200: is the padding fix (. = 14029b0) slower than base/ (4eeb3f6) with one rank alone at 128 tokens
# FP8 (calls 2 and 4: 17.8-17.9 against 18.1-18.8, with the kernel's trace level)? Four reps interleaved, the order
# alternating, with 1 token FP8 and 128 tokens BF16 beside it.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
R=1
for rep in 1 2 3 4; do
  for tf in "128 fp8" "1 fp8" "128 bf16"; do set -- $tf; T=$1 F=$2
    if [ $((rep % 2)) = 1 ]; then b "1r $T $F a-base"; run base; b "1r $T $F b-fix"; run .
    else b "1r $T $F b-fix"; run .; b "1r $T $F a-base"; run base; fi
  done
done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
