#!/usr/bin/env bash
# v41 call 9, 2x H200 (lent again): . = main as of v41 (v40's kernels as reviewed; the trace's sub-steps and clock
# stamps only in trace builds) against base/ = 4eeb3f6 (v39 as reviewed, the committed sweep's), reps interleaved
# at the decode sizes (pad138-h200x2.sh, v40's plan: 128 tokens FP8 had 3 padding blocks in base; 1-8 tokens the LL
# combine), and regs2/ = branch exp-bf16-send (the single-launch BF16 send from registers: the sender's mark 0.6 us
# earlier in one H200's trace, level there end to end) at 1-8 tokens BF16; checks; the sweep of .
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf v41 EP_CUDA_LOG_WAITS=1
cp /tmp/conformance-v41.txt $OUT/conformance.txt
ab 2 "2 128 fp8" "2 128 bf16" "2 32 fp8" "2 8 fp8" "2 1 fp8" -- a-base:base b-v41:.
ab 2 "2 1 bf16" "2 8 bf16" -- a-base:base b-v41:. c-regs2:regs2
env EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu soak --backend cuda --ranks 2 --rounds 8 --format fp8 > /tmp/memcheck-fp8.txt 2>&1
echo "memcheck v41 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/memcheck-fp8.txt | tr '\n' ' ')" >> $OUT/rc.txt
echo "checks done $(elapsed)" >> $OUT/rc.txt
timeout 240 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$? $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
