#!/usr/bin/env bash
# v20a (assign in runs of 4 tokens, 1024-thread blocks; the early count publish on the copy stream): suites, A/B against c84267e, grid trace.
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
for rep in 1 2; do
for tf in "4096 bf16" "4096 fp8" "2048 bf16" "1024 bf16" "1024 fp8" "512 fp8"; do set -- $tf
  for v in base new; do b=./ep-gpu; [ $v = base ] && b=base/ep-gpu
    timeout 60 $b bench --backend cuda --tokens $1 --format $2 --passes 2 --breakdown > /tmp/b.txt 2>&1
    echo "$v $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9]' /tmp/b.txt | sed -n 2p | cut -c24-90)" | tee -a $OUT/ab.txt
  done; done; done
timeout 40 ./ep-gpu soak --backend cuda --rounds 3000 --ranks 2 > /tmp/logs/soak.txt 2>&1; echo "soak rc=$? $(tail -n 1 /tmp/logs/soak.txt)" >> $OUT/rc.txt
EP_CUDA_OVERLAP_MIN_TOKENS=1 timeout 40 ./ep-gpu soak --backend cuda --rounds 2000 --ranks 2 > /tmp/logs/soak-ov.txt 2>&1; echo "soak overlapped rc=$? $(tail -n 1 /tmp/logs/soak-ov.txt)" >> $OUT/rc.txt
EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --rounds 5 > /tmp/t.txt 2>&1
echo "== 4096 bf16 overlapped" >> $OUT/grid.txt; python3 trace_grid.py /tmp/t.txt >> $OUT/grid.txt 2>&1
tar czf $OUT/logs.tar.gz -C /tmp logs
cat $OUT/rc.txt $OUT/grid.txt
