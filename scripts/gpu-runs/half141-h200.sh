#!/usr/bin/env bash
# v40 call 4, one H200: half/ = branch exp-half-copy (the single-launch copy-out by half blocks, two messages in flight
# a block, when it has more messages than blocks) against . = 14029b0's kernels. Where a block copies several messages:
# two ranks sharing the GPU (32 sending blocks: 128 tokens ~8 messages a block, 32 and 64 tokens 2-4); one rank alone
# at 128 tokens (one message a block: the block path, a control). Checks of half/: every world, memcheck, racecheck and
# synccheck (named barriers) on 2-rank soaks (17-64 tokens take the halves).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
env EP_CUDA_LOG_WAITS=1 timeout 150 half/ep-gpu conformance --backend cuda > $OUT/conformance-half.txt 2>&1
echo "conf half rc=$? $(elapsed) $(tail -n 1 $OUT/conformance-half.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-half.txt | head -20 >> $OUT/rc.txt
for rep in 1 2; do
  for rtf in "2 128 fp8" "2 128 bf16" "2 64 fp8" "2 32 fp8" "2 32 bf16" "1 128 fp8" "2 1 bf16"; do set -- $rtf; R=$1 T=$2 F=$3
    b "${R}r $T $F a-fix"; run .
    b "${R}r $T $F b-half"; run half
  done
done
echo "a/b done $(elapsed)" >> $OUT/rc.txt
for tool in memcheck racecheck synccheck; do
  env EP_WRAP="compute-sanitizer --tool $tool --print-limit 10" timeout 120 half/ep-gpu soak --backend cuda --ranks 2 --rounds 6 --format fp8 > /tmp/$tool.txt 2>&1
  echo "$tool half 2r fp8 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|rounds matched' /tmp/$tool.txt | tr '\n' ' ')" >> $OUT/rc.txt
done
echo "checks done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
