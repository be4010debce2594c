#!/usr/bin/env bash
# v44 call 1, one H200: . = the single-launch dispatch's messages copied by warps (ep_copy_message_warps: no barrier
# between the mark and the stores; the rows' expert found without a division) against base/ = c511040 (v43). The
# clock probe (is clock64 finer than %globaltimer's 256 ns?), the suite in the four path modes, sanitizers on
# single-launch soaks, a 3-rank single-launch soak, reps interleaved at decode sizes, traces.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
timeout 120 ./ep-gpu bench --backend cuda --probe-signals > $OUT/probe.txt 2>&1; echo "probe rc=$? $(elapsed)" >> $OUT/rc.txt
grep -E "globaltimer|SM clock" $OUT/probe.txt >> $OUT/rc.txt
conf_modes warps
sanitize_with "$S" "warps single-launch" bf16 memcheck racecheck synccheck
sanitize_with "$S" "warps single-launch" fp8 memcheck
soak "fp8 single-launch" 3 100 fp8 $S
soak "bf16 defaults" 2 200 bf16
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 32 fp8" "1 128 fp8" -- a-base:base b-warps:.
traces base:base warps:. -- "1 1 bf16" "2 1 bf16" "1 128 fp8"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
