#!/usr/bin/env bash
# v29: the lean overlapped dispatch (2d6de28) on one H100, every world of 2, 4 and 8 ranks: suites with the defaults,
# with every dispatch overlapped and lean (every format) with the send blocks waiting for the layout and every combine
# marked, and lean on a 1-block copy-out; 8-rank lean soaks; memcheck on a 4-rank and racecheck on a 2-rank lean soak.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
L="EP_CUDA_LEAN_MIN_TOKENS=1"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $O $L $W timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf all-overlapped lean placed marked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $O $L EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf all-overlapped lean 1-block copy rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt /tmp/c2.txt /tmp/c3.txt | head -20 >> $OUT/rc.txt
for f in bf16 fp8; do env $O $L timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f overlapped lean rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $O $L EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 4 --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak4 bf16 overlapped lean 8-block copy rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $O $L EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format bf16 > /tmp/r.txt 2>&1; echo "racecheck soak2 bf16 overlapped lean 8-block copy rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' /tmp/r.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
