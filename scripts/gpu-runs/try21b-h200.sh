#!/usr/bin/env bash
# v21 call 2: branch v21-marked-combine with the copy-out's msg_rows pointer null unless the round
# is marked (call 1: written between nodes into a 16-byte buffer, an illegal address from
# two_nodes_x4 on). Suites every way the marked path is reached, soak, sanitizers; then the
# reduce's grid (EP_CUDA_MARKED_REDUCE_BLOCKS) against main (base/) at the marked sizes.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
suite() { local name=$1; shift; env "$@" timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conformance-cuda-2xh200-$name.txt 2>&1; echo "conf $name rc=$? $(tail -n 1 /tmp/logs/conformance-cuda-2xh200-$name.txt)" >> $OUT/rc.txt; }
suite run1 X=1
suite all-marked EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0
suite all-marked-no-ll EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_LL_MAX_TOKENS=0
suite all-marked-132 EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_MARKED_REDUCE_BLOCKS=132
suite overlapped-single-combine EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=1000000
suite marked-off EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_MARKED_COMBINE=0
grep -h -B2 -A12 FAILED /tmp/logs/conformance-*.txt | head -80 > $OUT/fail.txt
cat $OUT/rc.txt
EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 timeout 40 ./ep-gpu soak --backend cuda --rounds 1000 --ranks 2 > /tmp/logs/soak-marked.txt 2>&1; echo "soak marked rc=$? $(tail -n 1 /tmp/logs/soak-marked.txt)" >> $OUT/rc.txt
{ echo "### memcheck (marked)"; EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 10 --ranks 2; echo "memcheck rc=$?";
  echo "### racecheck (marked)"; EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 60 ./ep-gpu soak --backend cuda --rounds 5 --ranks 2; echo "racecheck rc=$?"; } > /tmp/logs/sanitizer-2xh200.txt 2>&1
grep -E "rc=|SUMMARY|rounds matched" /tmp/logs/sanitizer-2xh200.txt | tee -a $OUT/rc.txt
for tf in "4096 bf16" "4096 fp8" "2048 bf16" "2048 fp8" "1024 bf16"; do set -- $tf
  for v in base 66 88 110 132; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    EP_CUDA_MARKED_REDUCE_BLOCKS=$v timeout 60 $b bench --backend cuda --tokens $1 --format $2 --passes 2 --breakdown > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9]' /tmp/b.txt | sed -n 2p | cut -c24-200)" | tee -a $OUT/ab.txt
  done; done
tar czf $OUT/logs.tar.gz -C /tmp logs
cat $OUT/rc.txt
