#!/usr/bin/env bash
# v38 review, call 6, one H200: new = 111b6a5 (ep_block_scan as before v38; v38's message counts beside the layout kept)
# against prev = f662fb1 (v38 as measured in call 4). Checks on new: every world with the defaults and with every phase
# single-launch and marked. Then the A/B at 1 token, two reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt) ($(grep -c slices $OUT/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single-marked $S $M
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "2 1 fp8" "1 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-prev"; run prev EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
