#!/usr/bin/env bash
# v40 call 7, one H200: relaxed/ = the counts' read report relaxed when the poll succeeded (no MEMBAR.GPU before the
# layout) against . = 50b1844's kernels. Checks of relaxed/: every world, memcheck on a 2-rank soak.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
D=relaxed conf relaxed EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-relaxed.txt $OUT/conformance-relaxed.txt
ab 2 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "2 8 bf16" "2 32 fp8" "1 128 fp8" -- a-head:. b-relaxed:relaxed
env EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 relaxed/ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > /tmp/memcheck.txt 2>&1
echo "memcheck relaxed 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/memcheck.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
