#!/usr/bin/env bash
# v32 call 3, one H100, on 9aabd44 (layout-first from 512 tokens, not where ranks share a GPU): does layout-first pay
# above the overlap thresholds too? D the defaults (overlapped: BF16 from 1024, FP8 from 2048); LF no overlap, so the
# round is layout-first; S no overlap and no layout-first (the plain multi-kernel chain). One rank alone, and two
# sharing the GPU (layout-first forced there from 512), two reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
LF="EP_CUDA_OVERLAP_MIN_TOKENS=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=512"
S="EP_CUDA_OVERLAP_MIN_TOKENS=0 EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0"
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 90 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for tf in "1024 bf16" "2048 bf16" "4096 bf16" "2048 fp8" "4096 fp8"; do
    set -- $tf
    b "1r $1 $2 D"; run 1 $1 $2
    b "1r $1 $2 LF"; (export $LF; run 1 $1 $2)
    b "1r $1 $2 S"; (export $S; run 1 $1 $2)
  done
  for tf in "1024 bf16" "2048 bf16" "2048 fp8"; do
    set -- $tf
    b "2r $1 $2 D"; run 2 $1 $2
    b "2r $1 $2 LF"; (export $LF; run 2 $1 $2)
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
