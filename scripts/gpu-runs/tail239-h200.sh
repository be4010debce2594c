#!/usr/bin/env bash
# v50 call 1 (one H200): the layout-first FP8 send's tail (ep_send_tail: each send block, once its token is sent,
# copies out the peers' messages of its index, marking them placed for the copy-out). The suite in the four path
# modes, with every dispatch layout-first and the tail waiting up to 1 ms (every message it can) and 1 ns (most left
# to the copy-out); memcheck and racecheck on layout-first FP8 soaks with the long tail; then the A/B on two ranks
# sharing the GPU, layout-first forced (the default there is the chain): tail off, 3 us (the default), 20 us; and
# HEAD against 9b647cd (base/) where the tail does not apply; a trace of 2 ranks 512 FP8 layout-first.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
conf_modes new
conf tail-long $LF EP_CUDA_SEND_TAIL_NS=1000000
conf tail-short $LF EP_CUDA_SEND_TAIL_NS=1
sanitize_with "$LF EP_CUDA_SEND_TAIL_NS=1000000" tail fp8 memcheck racecheck
soak tail-long 2 200 fp8 $LF EP_CUDA_SEND_TAIL_NS=1000000
soak tail-long 4 100 fp8 $LF EP_CUDA_SEND_TAIL_NS=1000000
LFC="EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
ab 3 "2 512 fp8" "2 256 fp8" "2 384 fp8" "2 512 fp8 --skewed" -- a-off:.,$LFC,EP_CUDA_SEND_TAIL_NS=0 b-3us:.,$LFC c-20us:.,$LFC,EP_CUDA_SEND_TAIL_NS=20000
ab 1 "1 512 fp8" "1 1024 fp8" "2 512 fp8" "2 128 fp8" -- a-base:base b-head:.
mkdir -p /tmp/tr
for v in 0 3000; do
  env EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SEND_TAIL_NS=$v EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 512 --format fp8 --passes 1 --rounds 40 2>&1 | grep -E '^trace |^t[0-9]|rror' > /tmp/tr/trace-2r-512-fp8-lf-tail$v.txt
done
tar czf $OUT/traces.tgz -C /tmp/tr .
echo "traces done $(elapsed)" >> $OUT/rc.txt
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
