#!/usr/bin/env bash
# v37 call 6, one H100: the dispatch at 32 and 128 tokens one rank alone read 0.4-1.5 us slower with v37 (call 5) though
# its kernels did not change: new = f2d967e, off = new with EP_CUDA_SINGLE_MARKED_MIN_TOKENS=0 (no marks: the dispatch
# without the flag, the combine with the ticket, rows still four at a time), base = 3920080. Three reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 32 fp8" "1 128 fp8" "1 128 bf16"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-off"; run . EP_CUDA_SINGLE_MARKED_MIN_TOKENS=0
    b "${R}r $T $F c-new"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
