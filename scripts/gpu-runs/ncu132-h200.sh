#!/usr/bin/env bash
# v39 call 7, one H200, main's kernels (v38's) compiled with -lineinfo (EP_CUDA_LINEINFO=1): Nsight Compute's warp state
# sampling (every 32 cycles) and per-instruction counts of one launch, after 30, of the single-launch dispatch (1 token
# BF16 and 128 tokens FP8) and combine (1 token), one rank alone: what each step of the decode chain stalls on.
cd "$(dirname "$0")"
T0=$(date +%s)
export EP_CUDA_LINEINFO=1
R=/tmp/ncu; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; which ncu; ncu --version | tail -1; } > $OUT/ncu-log.txt 2>&1
prof() { local name=$1 kern=$2 t=$3 f=$4
  timeout 200 ncu --clock-control none --target-processes all --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy --warp-sampling-interval 0 -k regex:$kern --launch-skip 30 --launch-count 1 -f -o $R/$name ./ep-gpu bench --backend cuda --ranks 1 --tokens $t --format $f --passes 1 --rounds 40 >> $OUT/ncu-log.txt 2>&1
  echo "prof $name rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/ncu-log.txt
  ncu -i $R/$name.ncu-rep --page source --csv --print-source sass > $OUT/$name-sass.csv 2>&1
  ncu -i $R/$name.ncu-rep --page details --csv > $OUT/$name-details.csv 2>&1
}
prof d1 ep_dispatch_single 1 bf16
prof c1 ep_combine_single 1 bf16
prof d128 ep_dispatch_single 128 fp8
echo "done $(( $(date +%s) - T0 ))s" >> $OUT/ncu-log.txt
grep -E "^prof|^done|ERROR" $OUT/ncu-log.txt | head;  ls -la $OUT; head -c 1500 $OUT/d1-sass.csv
