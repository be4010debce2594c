#!/usr/bin/env bash
# v27, call 4 (on call 3's machine, whose sweep did not come back: over eight files under $OUT): the sweep of the build
# call 3 picked (g198: FP8 copy blocks 3/2 per SM with the own rows), racecheck on a placed FP8 overlapped soak.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
timeout 200 g198/ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 100 g198/ep-gpu soak --backend cuda --rounds 10 --ranks 2 --format fp8 > $OUT/racecheck-fp8-placed.txt 2>&1; echo "racecheck fp8 overlapped placed rc=$? $(grep -h 'RACECHECK SUMMARY' $OUT/racecheck-fp8-placed.txt | head -1) $(tail -n 1 $OUT/racecheck-fp8-placed.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
