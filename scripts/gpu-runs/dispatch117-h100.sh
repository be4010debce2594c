#!/usr/bin/env bash
# v37 call 9, one H100 (the runs below were without the eviction: EP_BENCH_EVICT_L2 was not set): with L2 evicted before each phase the dispatch at 32-128 tokens one rank alone still read 1-2 us
# slower with v37 (call 8). Is it the single-launch dispatch's own code (its new `marked` parameter: 4 instructions in
# the counting block, the rest 64 bytes later) or the combine before it? new = c231dab; rev = new with dispatch.cu as
# v36 had it (no `marked`: rounds unmarked, the combine otherwise v37's); base = 3920080 with the bench's eviction.
# Then new and base with every combine multi-kernel (EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0). Three reps interleaved.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 32 fp8" "1 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-rev"; run rev EP_X=1
    b "${R}r $T $F c-new"; run . EP_X=1
    b "${R}r $T $F d-base-c0"; run base EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
    b "${R}r $T $F e-new-c0"; run . EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
