#!/usr/bin/env bash
# v34 call 8, one H200 (the sweep's GPU model, without its NVLink peer), on the final code (per-format single-launch
# dispatch, padding over the blocks not still sending, FP8 encode four blocks a warp at once): checks (every world with
# the defaults; memcheck on single-launch and multi-kernel FP8 soaks), then pad/ = df31ce0 (before the encode change)
# against it on FP8, two reps interleaved; v33/ = 4209df9 (v33 as submitted) against it, decode sizes, one rep; and
# 4096 tokens FP8 one rank alone, pad/ against it.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 80 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/memcheck-single.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 80 ./ep-gpu soak --backend cuda --ranks 2 --rounds 5 --format fp8 > $OUT/memcheck-multi.txt 2>&1; echo "memcheck soak2 fp8 multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-multi.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 $1/ep-gpu bench --backend cuda --ranks $2 --tokens $3 --format $4 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 fp8" "1 32 fp8" "1 128 fp8" "2 1 fp8"; do set -- $rt
    b "${1}r $2 $3 b-pad"; run pad $1 $2 $3
    b "${1}r $2 $3 c-new"; run . $1 $2 $3
  done
done
for rt in "1 1 bf16" "1 32 bf16" "1 128 bf16" "2 1 bf16" "1 1 fp8" "1 32 fp8" "1 128 fp8" "2 1 fp8"; do set -- $rt
  b "${1}r $2 $3 a-v33"; run v33 $1 $2 $3
  b "${1}r $2 $3 c-new"; run . $1 $2 $3
done
b "1r 4096 fp8 b-pad"; run pad 1 4096 fp8
b "1r 4096 fp8 c-new"; run . 1 4096 fp8
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4
