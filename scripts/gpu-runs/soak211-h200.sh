#!/usr/bin/env bash
# v47 call 6 (one H100: no H200 could be started; soaks need no timings), on 56110ce (062a2eb's kernels): soaks, bit-exact against the oracle each round, of the paths
# whose send writes its own rows: layout-first FP8 and BF16 (2 ranks), every own message placed (2 ranks BF16), 4 ranks
# with the defaults, and one rank alone at 1024 tokens.
cd "$(dirname "$0")"
. ./lib.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > $OUT/rc.txt
soak lf 2 300 fp8 $LF
soak lf 2 200 bf16 $LF
soak own 2 200 bf16 $OWN
soak defaults 4 200 fp8
soak defaults 1 200 fp8
cat $OUT/rc.txt
