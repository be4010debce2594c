#!/usr/bin/env bash
# v39 call 1, one H200: new = ae3a18e (the single-launch phases prefetch into L2, a thread per 2 MiB page, what they touch
# after their first steps; EP_BENCH_EVICT_L2=rN reads N MiB) against base = 8e9fb4c (v38 review 10685eb with this bench). A/B interleaved, warm
# (no evict), 256 MiB written before each gate (1) and 256 MiB read (r256). Then traces of 1 token BF16 one rank alone
# cold (r256), both builds; then checks on new: every world with the defaults and with every phase single-launch and
# marked; memcheck on a single-launch marked soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_MARKED_MIN_TOKENS=1 EP_CUDA_LL_MAX_TOKENS=0"
b() { echo "== $*" >> $OUT/ab.txt; }
run() { local dir=$1; shift; env "$@" timeout 60 $dir/ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "2 1 bf16" "1 32 fp8" "1 128 fp8"; do set -- $rt; R=$1 T=$2 F=$3
    for ev in 0 1 r256; do
      [ $rep = 2 ] && [ $T = 128 ] && [ $ev = 1 ] && continue
      b "${R}r $T $F ev$ev a-base"; run base EP_BENCH_EVICT_L2=$ev
      b "${R}r $T $F ev$ev b-new"; run . EP_BENCH_EVICT_L2=$ev
    done
  done
  echo "rep $rep done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
done
tr() { env EP_BENCH_EVICT_L2=r256 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 $1/ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]' > $OUT/trace-$2.txt; }
tr base base; tr . new
echo "traces done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
conf() { local name=$1; shift; local t0=$(date +%s); env "$@" timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-$name.txt 2>&1; echo "conf $name rc=$? $(( $(date +%s) - t0 ))s $(tail -n 1 $OUT/conformance-$name.txt) ($(grep -c slices $OUT/conformance-$name.txt) waits of 2+ slices)" >> $OUT/rc.txt; }
conf defaults EP_X=1
[ $(( $(date +%s) - T0 )) -lt 420 ] && conf single-marked $S $M
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
[ $(( $(date +%s) - T0 )) -lt 500 ] && { env $S $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 80 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 > $OUT/sanitizers.txt 2>&1; echo "memcheck soak2 single marked rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/sanitizers.txt | tr '\n' ' ')" >> $OUT/rc.txt; }
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,5
