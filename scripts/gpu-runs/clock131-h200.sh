#!/usr/bin/env bash
# v39 call 6, one H200, bundle from branch exp-twice (trace builds: SM cycles over a block's span, dispatch stamp 7 in
# blocks that sent nothing, combine stamp 14, printed as cycles / 1000): the SM clock while a decode phase runs, against
# the time its steps take. Plus nvidia-smi's clocks sampled every 50 ms during a bench of many rounds.
cd "$(dirname "$0")"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.applications.graphics,clocks.sm --format=csv,noheader > $OUT/rc.txt
trace() { local r=$1 t=$2 f=$3; shift 3; env "$@" EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 60 ./ep-gpu bench --backend cuda --ranks $r --tokens $t --format $f --passes 1 --rounds 40 2>&1 | grep -E '^trace|^t[0-9]'; }
trace 1 1 bf16 EP_X=1 > $OUT/trace-1r-1-bf16.txt
trace 2 1 bf16 EP_X=1 > $OUT/trace-2r-1-bf16.txt
trace 1 128 fp8 EP_X=1 > $OUT/trace-1r-128-fp8.txt
trace 1 1 bf16 EP_BENCH_EVICT_L2=r256 EP_BENCH_REWARM=inputs > $OUT/trace-1r-1-bf16-inputs.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,clocks_event_reasons.active --format=csv -lms 50 > $OUT/smi.txt 2>&1 &
P=$!
sleep 1
timeout 60 ./ep-gpu bench --backend cuda --ranks 1 --tokens 1 --format bf16 --passes 1 --rounds 3000 2>&1 | grep -E '^t[0-9]' >> $OUT/rc.txt
sleep 1
kill $P
echo "done $(( $(date +%s) - T0 ))s" >> $OUT/rc.txt
cat $OUT/rc.txt
cut -d, -f2- $OUT/smi.txt | sort | uniq -c | sort -rn | head -20
