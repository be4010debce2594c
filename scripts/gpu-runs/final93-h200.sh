#!/usr/bin/env bash
# v34 call 10, one H200, on the code as submitted (per-format dispatch, padding, plain combine): sanitizers and an 8-rank
# soak with every phase single-launch, then v33/ = 4209df9 (v33 as submitted) against it at decode sizes, one rep.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 80 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/memcheck-single.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 80 ./ep-gpu soak --backend cuda --ranks 2 --rounds 5 --format bf16 > $OUT/racecheck-single.txt 2>&1; echo "racecheck soak2 bf16 single rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' $OUT/racecheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $S timeout 90 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format bf16 > /tmp/soak8.txt 2>&1; echo "soak8 bf16 single rc=$? $(tail -n 1 /tmp/soak8.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 40 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rt in "1 1 bf16" "1 1 fp8" "1 32 bf16" "1 32 fp8" "1 128 bf16" "1 128 fp8" "2 1 bf16" "2 1 fp8"; do set -- $rt
  b "${1}r $2 $3 a-v33"; run v33 $1 $2 $3
  b "${1}r $2 $3 b-v34"; run . $1 $2 $3
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
