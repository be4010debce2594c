#!/usr/bin/env bash
# v33 call 7, one H100, on ead51ec (the final code: the single-launch dispatch's copy-out walk rotated past the blocks
# still sending): suites over every world with the defaults and with every phase single-launch, memcheck on a
# single-launch soak, 300-round 8-rank single-launch soaks.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
S="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=1000000 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $S timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-single.txt 2>&1; echo "conf every phase single-launch rc=$? $(tail -n 1 $OUT/conformance-single.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt | head -40 >> $OUT/rc.txt
env $S EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 100 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > $OUT/memcheck-single.txt 2>&1; echo "memcheck soak2 fp8 single rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' $OUT/memcheck-single.txt | tr '\n' ' ')" >> $OUT/rc.txt
for f in fp8 bf16; do env $S timeout 120 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/soak8-$f.txt 2>&1; echo "soak8 $f single rc=$? $(tail -n 1 /tmp/soak8-$f.txt)" >> $OUT/rc.txt; done
cat $OUT/rc.txt
