#!/usr/bin/env bash
# v37 calls 7-8, one H100 (call 7 ran base against base: both binaries were the base build, see the record): is the dispatch's +1-1.5 us at 128 tokens one rank alone (calls 5-6) the L2 state the combine
# before it leaves? new = c231dab (v37 + EP_BENCH_EVICT_L2), base = 3920080 with the same bench change applied
# (untimed 256 MiB memset before each start gate). Three reps interleaved with the eviction, one without.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3; do
  for rt in "1 32 fp8" "1 128 fp8" "1 128 bf16" "2 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F evict a-base"; run base EP_BENCH_EVICT_L2=1
    b "${R}r $T $F evict b-new"; run . EP_BENCH_EVICT_L2=1
  done
done
for rt in "1 32 fp8" "1 128 fp8" "1 128 bf16"; do set -- $rt; R=$1 T=$2 F=$3
  b "${R}r $T $F plain a-base"; run base EP_X=1
  b "${R}r $T $F plain b-new"; run . EP_X=1
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,5
