#!/usr/bin/env bash
# v27, call 9: grid traces of the overlapped BF16 round at 4096 tokens (b067559): as committed (BF16 sends its own message,
# the copy-out expands it) and with EP_CUDA_OWN_ROWS=1 (the send blocks write the own rows, 288 -> 332 us in call 1), to see
# which grid ends the round (scripts/trace_grid.py).
cd "$(dirname "$0")"
for v in committed own-rows; do
  e=X=1; [ $v = own-rows ] && e=EP_CUDA_OWN_ROWS=1
  env $e EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --rounds 5 > $OUT/trace-bf16-$v.txt 2>&1
  python3 trace_grid.py $OUT/trace-bf16-$v.txt > $OUT/grid-bf16-$v.txt 2>&1; gzip $OUT/trace-bf16-$v.txt
done
cat $OUT/grid-bf16-*.txt
