#!/usr/bin/env bash
# v20 measurement: validate the build (suite), then where the prefill dispatch's time goes: grid traces at 4096.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance.txt 2>&1; echo "conf rc=$? $(tail -n 1 $OUT/conformance.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
for f in bf16 fp8; do
  timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 2 --breakdown > /tmp/b.txt 2>&1
  echo "overlap $f $(grep -E '^t[0-9]' /tmp/b.txt | head -3 | tr '\n' ' ')" | tee -a $OUT/ab.txt
  EP_CUDA_OVERLAP_MIN_TOKENS=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 2 --breakdown > /tmp/b.txt 2>&1
  echo "sequential $f $(grep -E '^t[0-9]' /tmp/b.txt | head -3 | tr '\n' ' ')" | tee -a $OUT/ab.txt
  cp /tmp/b.txt $OUT/bench-seq-$f.txt
done
for f in bf16 fp8; do
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --rounds 5 > /tmp/t.txt 2>&1
  echo "== 4096 $f overlapped" >> $OUT/grid.txt; python3 trace_grid.py /tmp/t.txt >> $OUT/grid.txt 2>&1
  gzip -c /tmp/t.txt > $OUT/trace-4096-$f.txt.gz
  EP_CUDA_OVERLAP_MIN_TOKENS=0 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format $f --passes 1 --rounds 5 > /tmp/t.txt 2>&1
  echo "== 4096 $f sequential" >> $OUT/grid.txt; python3 trace_grid.py /tmp/t.txt >> $OUT/grid.txt 2>&1
  gzip -c /tmp/t.txt > $OUT/trace-4096-$f-seq.txt.gz
done
cat $OUT/grid.txt
