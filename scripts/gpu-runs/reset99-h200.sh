#!/usr/bin/env bash
# v35 call 5, one H200, on the counts reset off the last finisher (65ce6e2's kernels, as submitted) against
# base/ = c4a2916 (v34), two reps interleaved, at the decode sizes it moves.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 8 fp8" "2 1 bf16" "2 1 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
  done
done
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
