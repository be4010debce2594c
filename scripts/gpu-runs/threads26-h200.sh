#!/usr/bin/env bash
# v26 exploration: the dispatch send's block size (EXPERIMENT override EP_CUDA_SEND_THREADS) at the
# multi-kernel sizes, 512 / 256 / 128 threads interleaved, with the breakdown; then one suite with
# 128-thread send blocks and every phase multi-kernel.
cd "$(dirname "$0")"
mkdir -p /tmp/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
for tf in "512 fp8" "1024 fp8" "4096 fp8" "512 bf16" "1024 bf16" "4096 bf16"; do
  read -r tok fmt <<< "$tf"
  for th in 512 256 128 512 256 128; do
    EP_CUDA_SEND_THREADS=$th timeout 60 ./ep-gpu bench --backend cuda --tokens $tok --format $fmt --passes 1 --breakdown > /tmp/b.txt 2>&1
    echo "th=$th $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
  done; done
EP_CUDA_SEND_THREADS=128 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0 timeout 100 ./ep-gpu conformance --backend cuda > /tmp/logs/conf.txt 2>&1
echo "conf th128 multikernel rc=$? $(tail -n 1 /tmp/logs/conf.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED /tmp/logs/conf.txt | head -40 > $OUT/fail.txt
cat $OUT/rc.txt
