#!/usr/bin/env bash
# v30, one H100: where the chunked assign's time goes (15b8988 + stamps), against v29's assign (993a406): grid traces of
# rank 0 (2 ranks on the one GPU) at 512 and 4096 tokens BF16, summarised by trace_summary.py.
cd "$(dirname "$0")"
for build in v29 .; do for t in 512 4096; do
  echo "== build $build $t bf16"
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 $build/ep-gpu bench --backend cuda --ranks 2 --tokens $t --format bf16 --passes 1 --rounds 20 > /tmp/t.txt 2>&1
  grep -E '^t[0-9]' /tmp/t.txt
  python3 trace_summary.py /tmp/t.txt > $OUT/summary-$(basename $build)-$t.txt 2>&1
  grep -A14 -E 'assign' $OUT/summary-$(basename $build)-$t.txt | head -24
done; done
