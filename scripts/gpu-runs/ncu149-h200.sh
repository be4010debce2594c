#!/usr/bin/env bash
# v41 call 3, one H200, main's kernels (ad34dd4) with line info: Nsight Compute's warp-state samples (every 32 cycles)
# per instruction of the single-launch dispatch, one rank alone, 1 token BF16 and FP8, two launches each: what the
# sending block's ~1.2 us between its message encoded and its stores issued (trace stamps 13 -> 14) stalls on.
cd "$(dirname "$0")"
T0=$(date +%s)
export EP_CUDA_LINEINFO=1
R=/tmp/ncu; mkdir -p $R
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1; } > $OUT/ncu-log.txt 2>&1
prof() { local name=$1 kern=$2 t=$3 f=$4 skip=$5
  timeout 200 ncu --clock-control none --section WarpStateStats --section SourceCounters --warp-sampling-interval 0 -k regex:$kern --launch-skip $skip --launch-count 1 -f -o $R/$name ./ep-gpu bench --backend cuda --ranks 1 --tokens $t --format $f --passes 1 --rounds 40 >> $OUT/ncu-log.txt 2>&1
  echo "prof $name rc=$? $(( $(date +%s) - T0 ))s" >> $OUT/ncu-log.txt
  ncu -i $R/$name.ncu-rep --page source --csv --print-source sass > $R/$name-sass.csv 2>&1
}
prof d1a ep_dispatch_single 1 bf16 30
prof d1b ep_dispatch_single 1 bf16 33
prof f1a ep_dispatch_single 1 fp8 30
prof f1b ep_dispatch_single 1 fp8 33
tar czf $OUT/ncu.tgz -C $R $(cd $R && ls *-sass.csv)
echo "done $(( $(date +%s) - T0 ))s" >> $OUT/ncu-log.txt
grep -E "^prof|^done|ERROR|rror" $OUT/ncu-log.txt | head -20; ls -la $OUT
