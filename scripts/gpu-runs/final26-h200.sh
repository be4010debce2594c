#!/usr/bin/env bash
# v26 final (12476b5: BlockShape, FP8 overlapped copy-out on 5/3 blocks per SM): suites with the defaults and
# every dispatch overlapped, the sweep, an FP8 overlapped soak, then memcheck and racecheck on short FP8
# overlapped and BF16 multi-kernel soaks (the new block shapes).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-defaults.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-defaults.txt)" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance-all-overlapped.txt 2>&1; echo "conf all-overlapped rc=$? $(tail -n 1 $OUT/conformance-all-overlapped.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance-*.txt | head -40 > $OUT/fail.txt
timeout 300 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
env $O timeout 100 ./ep-gpu soak --backend cuda --rounds 2000 --ranks 2 --format fp8 > $OUT/soak-fp8-overlapped.txt 2>&1; echo "soak fp8 overlapped rc=$? $(tail -n 1 $OUT/soak-fp8-overlapped.txt)" >> $OUT/rc.txt
env $O EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 90 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2 --format fp8 > $OUT/memcheck-fp8-overlapped.txt 2>&1; echo "memcheck fp8 overlapped rc=$? $(grep -h 'ERROR SUMMARY' $OUT/memcheck-fp8-overlapped.txt | head -1) $(tail -n 1 $OUT/memcheck-fp8-overlapped.txt)" >> $OUT/rc.txt
EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 90 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2 > $OUT/racecheck-multikernel.txt 2>&1; echo "racecheck multikernel rc=$? $(grep -h 'RACECHECK SUMMARY' $OUT/racecheck-multikernel.txt | head -1) $(tail -n 1 $OUT/racecheck-multikernel.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
