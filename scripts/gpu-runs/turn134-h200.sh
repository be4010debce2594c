#!/usr/bin/env bash
# v39 call 9, one H200: c = HEAD (ep_copy_to's rest out of line and its first-piece stores a destination a turn) against
# b = a096f2f (the rest out of line only, call 8's new) and a = 351efe8 (v38's kernels). Checks on c: every world with
# the defaults and with every phase single-launch and marked; memcheck on a single-launch marked soak. A/B/C, two reps
# interleaved, warm; then ncu's warp sampling of c's 128-token FP8 dispatch.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > /tmp/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 /tmp/conformance-$name.txt) ($(grep -c slices /tmp/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; grep -h -B2 -A6 -E 'FAILED|FAIL ' /tmp/conformance-$name.txt | head -20 >> $OUT/rc.txt; }
conf defaults EP_X=1
conf single-marked $S $M
env $S $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 > /tmp/sanitizers.txt 2>&1; echo "memcheck soak2 single marked rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/sanitizers.txt | tr '\n' ' ')" >> $OUT/rc.txt
echo "checks done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "1 128 bf16" "2 1 bf16" "2 32 fp8" "1 1024 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-rest"; run rest EP_X=1
    b "${R}r $T $F c-turn"; run . EP_X=1
  done
  echo "rep $rep done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
done
export EP_CUDA_LINEINFO=1
timeout 120 ncu --clock-control none --target-processes all --section WarpStateStats --section SourceCounters --warp-sampling-interval 0 -k regex:ep_dispatch_single --launch-skip 30 --launch-count 1 -f -o /tmp/d128t ./ep-gpu bench --backend cuda --ranks 1 --tokens 128 --format fp8 --passes 1 --rounds 40 > /tmp/ncu-log.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
ncu -i /tmp/d128t.ncu-rep --page source --csv --print-source sass > $OUT/d128t-sass.csv 2>&1
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
