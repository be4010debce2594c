#!/usr/bin/env bash
# v52, call 2 (one H200; 2x H200 not lent): a phase's first kernel launched chained (launch_first) and `ep bench
# --timing step`. launch246.cu on H200; the suite in the four path modes and memcheck/synccheck on a soak with the
# first kernels chained; event timing of base (4364855) against HEAD (the event sits between the gate and the phase,
# so level is expected); step timing of HEAD against its first kernels launched plain (EP_CUDA_CHAINED_FIRST=0); one
# pass of the sweep one rank alone, events then step.
cd "$(dirname "$0")"
. ./lib.sh
NVCC=$(ls /usr/local/cuda*/bin/nvcc 2>/dev/null | head -1)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; echo "nvcc: $NVCC"; } > $OUT/rc.txt
$NVCC -O2 -arch=sm_90 -o /tmp/launch246 launch246.cu >> $OUT/rc.txt 2>&1 && /tmp/launch246 300 30000 > $OUT/launch.txt 2>&1
echo "launch rc=$? $(elapsed)" >> $OUT/rc.txt
conf_modes head
sanitize head bf16 memcheck synccheck
ab 2 "1 1 bf16" "1 128 fp8" "2 1 bf16" "2 128 fp8" -- a-base:base b-head:.
ab 2 "1 1 bf16 --timing step" "1 1 fp8 --timing step" "1 128 fp8 --timing step" "1 128 bf16 --timing step" "2 1 bf16 --timing step" "1 1024 fp8 --timing step" -- c-step:. d-step-plainfirst:.,EP_CUDA_CHAINED_FIRST=0
for t in events step; do
  timeout 150 ./ep-gpu bench --backend cuda --ranks 1 --sweep --passes 1 --timing $t --out $OUT/sweep-1r-$t.json > $OUT/sweep-1r-$t.txt 2>&1
  echo "sweep 1r $t rc=$? $(elapsed)" >> $OUT/rc.txt
done
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
