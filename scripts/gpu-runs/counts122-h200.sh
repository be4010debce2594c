#!/usr/bin/env bash
# v38 call 3, one H200: new = db522f1 (the layout's scan by shuffles; the counting block's addresses loaded beside the ids;
# the receivers' message counts beside the layout; no warp route) and w = e6cb0b8 (branch exp-warp-route: new plus the
# warp's route by ballots, the warp reconverged first) against base = 6b2a2b1 (v37 review). Checks: every world with
# the defaults and with every phase single-launch and marked on new, the latter on w. Then the A/B (two reps
# interleaved) and traces, new also with 256 MiB written before each gate (EP_BENCH_EVICT_L2=1).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
conf() { local name=$1 dir=$2; shift 2; local t0=$(date +%s); env "$@" timeout 150 $dir/ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt) ($(grep -c slices $OUT/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; }
conf defaults . EP_X=1
conf single-marked . $S $M
conf w-single-marked w $S $M
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks 2 --rounds 4 > $OUT/sanitizers.txt 2>&1; echo "racecheck soak2 single rc=$? $(grep -E 'RACECHECK SUMMARY|rounds matched' $OUT/sanitizers.txt | tail -2 | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 8 fp8" "1 32 fp8" "1 128 fp8" "2 1 bf16" "2 8 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F a-base"; run base EP_X=1
    b "${R}r $T $F b-new"; run . EP_X=1
    b "${R}r $T $F c-w"; run w EP_X=1
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
for v in "1 1 bf16 . EP_X=1" "1 1 bf16 w EP_X=1" "1 1 bf16 . EP_BENCH_EVICT_L2=1" "1 1 bf16 base EP_BENCH_EVICT_L2=1" "2 1 bf16 . EP_X=1"; do set -- $v
  echo "# ${1}r $2-$3 $4 $5" >> $OUT/traces.txt
  env $5 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $4/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]' >> $OUT/traces.txt
done
echo "traces rc=$?"
