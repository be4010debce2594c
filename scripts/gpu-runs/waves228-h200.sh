#!/usr/bin/env bash
# v49 call 3 (one H200) on c516694: the send of a round that does not overlap in 128-thread blocks where they fit the
# tokens in fewer waves (chain_send_threads). First the choice as made, from an experiment build (x/: c516694 with a
# line that prints the residency and the block size, EP_X_LOG_SEND, that build's only); then the suite in the four path
# modes and with every own message placed; then the new default against 256- and 128-thread blocks everywhere
# (EP_CUDA_SEND_THREADS), FP8 and BF16 rounds that do not overlap (FP8 to 2047 tokens, BF16 to 1023).
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
for sc in "1 768 fp8" "1 1024 fp8" "1 1536 fp8" "1 512 bf16" "1 768 bf16" "2 256 fp8" "2 1024 fp8" "2 512 bf16" "4 512 fp8"; do
  set -- $sc
  echo "x-send ${1}r $2 $3: $(EP_X_LOG_SEND=1 timeout 60 x/ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 2>&1 | grep x-send | sort | uniq -c | head -3 | tr '\n' ';')" >> $OUT/rc.txt
done
conf_modes new
conf new-own $OWN
ab 2 "1 256 fp8" "1 512 fp8" "1 768 fp8" "1 1024 fp8" "1 1280 fp8" "1 1536 fp8" "2 256 fp8" "2 512 fp8" "2 1024 fp8" "2 1536 fp8" "4 512 fp8" "1 512 bf16" "1 768 bf16" "2 256 bf16" "2 512 bf16" "2 768 bf16" -- a-new:. b-256:.,EP_CUDA_SEND_THREADS=256 c-128:.,EP_CUDA_SEND_THREADS=128
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
