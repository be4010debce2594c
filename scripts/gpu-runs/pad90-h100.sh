#!/usr/bin/env bash
# v34 call 7, one H100, on the single-launch dispatch's padding dealt over the blocks not still sending (on top of the
# per-format kernels): checks (every world with the defaults and every phase single-launch; memcheck and racecheck on
# single-launch FP8 soaks; an 8-rank 300-round single-launch FP8 soak), then base/ = 6f97abf (before it) against it,
# two reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $S timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-single.txt 2>&1; echo "conf every phase single-launch rc=$? $(tail -n 1 $OUT/conformance-single.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/memcheck-single.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 5 --format fp8 > $OUT/racecheck-single.txt 2>&1; echo "racecheck soak2 fp8 single rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' $OUT/racecheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S timeout 120 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format fp8 > /tmp/soak8.txt 2>&1; echo "soak8 fp8 single rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 fp8" "1 32 fp8" "1 128 fp8" "2 1 fp8" "1 1 bf16" "1 128 bf16"; do set -- $rt
    b "${1}r $2 $3 a-base"; run base $1 $2 $3
    b "${1}r $2 $3 b-new"; run . $1 $2 $3
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
