#!/usr/bin/env bash
# v39 call 4, one H200, main's kernels (main at 92c9630): why the dispatch reads slower with the phases' inputs read back
# after the evict (EP_BENCH_REWARM=inputs) than without (call 3: 1 token FP8 one rank alone 14.7 -> 15.5 us, two ranks
# sharing 16.2 -> 17.8). Traces of 1 token FP8, one rank alone and two ranks sharing, for r256, r256 + inputs and
# r256 + every buffer; then the A/B again with 4 reps interleaved.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
trace() { local r=$1 f=$2; shift 2; env "$@" EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $r --tokens 1 --format $f --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]'; }
for r in 1 2; do
  trace $r fp8 EP_BENCH_EVICT_L2=r256 > $OUT/trace-${r}r-r256.txt
  trace $r fp8 EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs > $OUT/trace-${r}r-inputs.txt
  trace $r fp8 EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1 > $OUT/trace-${r}r-all.txt
done
echo "traces done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { env "$@" timeout 60 ./ep-gpu bench --backend cuda --ranks $R --tokens $T --format $F --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2 3 4; do
  for rt in "1 1 fp8" "2 1 fp8" "1 1 bf16"; do set -- $rt; R=$1 T=$2 F=$3
    b "${R}r $T $F b-r256"; run EP_BENCH_EVICT_L2=r256
    b "${R}r $T $F c-r256-inputs"; run EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs
    b "${R}r $T $F d-r256-all"; run EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=1
  done
done
echo "reps done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,5
