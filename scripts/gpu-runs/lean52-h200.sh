#!/usr/bin/env bash
# v29 on 2x H200: the lean overlapped dispatch (2d6de28, . here). Suites with the defaults, with every dispatch overlapped
# and lean (every format), placed (the send blocks wait for the layout) and marked, and lean on a 1-block copy-out;
# 400-round lean soaks; memcheck on a lean soak; reps interleaved with v28's build (v28/ = 86a6753) at 4096 BF16 (the
# sizes the lean path takes) and 2048 BF16 (it does not); then the sweep.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
L="EP_CUDA_LEAN_MIN_TOKENS=1"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance.txt)" >> $OUT/rc.txt
env $O $L $W timeout 100 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf all-overlapped lean placed marked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $O $L EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 100 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf all-overlapped lean 1-block copy rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance.txt /tmp/c2.txt /tmp/c3.txt | head -20 >> $OUT/rc.txt
for f in bf16 fp8; do env $O $L timeout 60 ./ep-gpu soak --backend cuda --rounds 400 --format $f > /tmp/s.txt 2>&1; echo "soak $f overlapped lean rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $O $L EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 90 ./ep-gpu soak --backend cuda --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak bf16 overlapped lean rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 "$@" 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; }
for rep in 1 2; do for s in "4096 bf16" "4096 bf16 --skewed" "2048 bf16"; do for build in v28 . ; do
  set -- $s
  b "rep $rep $s build $build"; run $build/ep-gpu bench --backend cuda --tokens $1 --format $2 $3 --passes 1 --breakdown
done; done; done
grep -v ep_assign $OUT/ab.txt
timeout 150 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > $OUT/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
tail -n 3 $OUT/rc.txt
