#!/usr/bin/env bash
# v53 call 1 (one H200; 2x H200 not lent): the latency floors among ranks that share a GPU (bench.rs, measure_ceilings:
# the floors' kernels one per rank, placed as the run's worlds are), under event and step timing, so that the step-timed
# floors' path runs before the next 2x H200 session; the single-launch dispatch against the default chain at 256-512
# tokens one rank alone (SINGLE_DISPATCH_MAX_TOKENS is 128; thresholds209-h200x2.sh measures 256 on 2x H200); Nsight
# Compute's view of the FP8 send at 4096 tokens one rank alone (v48: it writes its ~240 MB of rows at ~1.9 TB/s).
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $OUT/rc.txt
fl() { # fl LABEL RANKS [ARGS]: the ceiling and floor lines of a 1-token bench
  local label=$1 ranks=$2; shift 2
  echo "== floors $label" >> $OUT/floors.txt
  timeout 120 ./ep-gpu bench --backend cuda --ranks $ranks --tokens 1 --passes 1 "$@" 2>&1 | grep -E '^ceiling|^floor|^t[0-9]|rror' >> $OUT/floors.txt
  echo "floors $label rc=$? $(elapsed)" >> $OUT/rc.txt
}
fl 2r-events 2
fl 2r-step 2 --timing step
fl 4r-step 4 --timing step
fl 2r-events-again 2
fl 2r-step-again 2 --timing step
ab 3 "1 256 fp8" "1 384 fp8" "1 512 fp8" "1 512 bf16" -- a-head:. b-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=512
ab 1 "1 256 fp8 --timing step" "1 512 fp8 --timing step" -- c-head:. d-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=512
# Nsight Compute: the FP8 send at 4096 tokens, one rank alone (two launches), line info for scripts/ncu_stalls.py.
R=/tmp/ncu; mkdir -p $R
prof() { local name=$1 kern=$2 t=$3 f=$4 skip=$5
  EP_CUDA_LINEINFO=1 timeout 200 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats --section SourceCounters --warp-sampling-interval 0 -k regex:$kern --launch-skip $skip --launch-count 1 -f -o $R/$name ./ep-gpu bench --backend cuda --ranks 1 --tokens $t --format $f --passes 1 --rounds 20 > /tmp/ncu-$name.txt 2>&1
  echo "prof $name rc=$? $(elapsed)" >> $OUT/rc.txt
  ncu -i $R/$name.ncu-rep --page details > $OUT/ncu-$name-details.txt 2>&1
  ncu -i $R/$name.ncu-rep --page source --csv --print-source sass > $R/$name-sass.csv 2>&1
}
prof s4096a ep_dispatch_send_fp8 4096 fp8 10
prof s4096b ep_dispatch_send_fp8 4096 fp8 13
tar czf $OUT/ncu.tgz -C $R $(cd $R && ls *-sass.csv)
cat $OUT/rc.txt
cat $OUT/floors.txt
summary | tee $OUT/summary.txt
