#!/usr/bin/env bash
# v35 review, one H100, on the review commit (the counting block's branch as one if/else; the single combine's kernel
# name from (ll, plain)): every world with the defaults and with every phase single-launch, then base/ = 65ce6e2
# (v35 as first submitted) against it, one rep, at 1 token.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
conf() { local name=$1; shift; env "$@" timeout 120 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 $OUT/conformance-$name.txt)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single $S
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -20 >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rt in "1 1 bf16" "2 1 fp8"; do set -- $rt; R=$1 T=$2 F=$3
  b "${R}r $T $F a-base"; run base
  b "${R}r $T $F b-review"; run .
done
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt
