#!/usr/bin/env bash
# v31, one H100: the chained launches' effect where they should not change anything, and one threshold lead. 4096
# tokens (the overlapped dispatch, send unchained; the marked combine), base/ (d3de099) against HEAD, one rank alone and
# two sharing the GPU; 128 tokens, one rank alone, the single-launch phases (default) against the chained multi-kernel
# path (EP_CUDA_SINGLE_*_MAX_TOKENS=0). Two reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror' >> $OUT/ab.txt; }
for rep in 1 2; do
  for r in 1 2; do for f in bf16 fp8; do b "${r}r 4096 $f base"; run base $r 4096 $f; b "${r}r 4096 $f HEAD"; run . $r 4096 $f; done; done
  for f in fp8 bf16; do b "1r 128 $f single"; run . 1 128 $f; b "1r 128 $f multi chained"; (export $M; run . 1 128 $f); done
done
awk '/^==/{l=$0; next} /^t[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
