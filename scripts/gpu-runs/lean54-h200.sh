#!/usr/bin/env bash
# v29, 2x H200: where the lean path starts to pay for BF16 (0d61dd8; its threshold, 4096 tokens, was measured against
# 2048 only): 2560, 3072 and 3584 tokens, lean forced (EP_CUDA_LEAN_MIN_TOKENS=1) against off (=0), reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/ab.txt
for rep in 1 2; do for t in 2560 3072 3584; do for lean in 0 1; do
  echo "== rep $rep $t bf16 lean $lean" >> $OUT/ab.txt
  EP_CUDA_LEAN_MIN_TOKENS=$lean timeout 60 ./ep-gpu bench --backend cuda --tokens $t --format bf16 --passes 1 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
done; done; done
cat $OUT/ab.txt
