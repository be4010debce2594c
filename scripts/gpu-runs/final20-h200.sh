#!/usr/bin/env bash
# v20 step 2 (the assign's ids staged in shared memory, 4 tokens a thread, one packed scan): suites three ways, the sweep,
# soaks, memcheck and racecheck, a grid trace.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-cuda-2xh200-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-cuda-2xh200-$name.txt)" >> $OUT/rc.txt; }
suite run1 X=1
suite all-overlapped EP_CUDA_OVERLAP_MIN_TOKENS=1
suite all-multikernel EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0
grep -h -B2 -A8 FAILED /tmp/logs/conformance-*.txt | head -60 > $OUT/fail.txt
cat $OUT/rc.txt
timeout 240 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
timeout 30 ./ep-gpu soak --backend cuda --rounds 3000 --ranks 2 > /tmp/logs/soak-2xh200.txt 2>&1; echo "soak rc=$? $(tail -n 1 /tmp/logs/soak-2xh200.txt)" >> $OUT/rc.txt
EP_CUDA_OVERLAP_MIN_TOKENS=1 timeout 30 ./ep-gpu soak --backend cuda --rounds 2000 --ranks 2 > /tmp/logs/soak-2xh200-all-overlapped.txt 2>&1; echo "soak overlapped rc=$? $(tail -n 1 /tmp/logs/soak-2xh200-all-overlapped.txt)" >> $OUT/rc.txt
{ echo "### memcheck (every dispatch overlapped)"; EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2; echo "memcheck rc=$?";
  echo "### racecheck (multi-kernel phases)"; EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 5 --ranks 2; echo "racecheck rc=$?"; } > /tmp/logs/sanitizer-2xh200.txt 2>&1
grep -E "rc=|SUMMARY|rounds matched" /tmp/logs/sanitizer-2xh200.txt | tee -a $OUT/rc.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 40 ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --rounds 5 > /tmp/t.txt 2>&1
echo "== 4096 bf16 overlapped" >> $OUT/grid.txt; python3 trace_grid.py /tmp/t.txt >> $OUT/grid.txt 2>&1
tar czf $OUT/logs.tar.gz -C /tmp logs
cat $OUT/rc.txt $OUT/grid.txt
