#!/usr/bin/env bash
# v29: the overlapped copy-out at 48 registers, 2 pieces a lane (7dd1cc0) on one H100: suites over every world of 2, 4
# and 8 ranks (defaults; every dispatch overlapped, placed, marked; every dispatch overlapped on a 1-block copy-out),
# 8-rank overlapped soaks, memcheck and racecheck on overlapped soaks; then 2 ranks on the one GPU against base/
# (6074325, the 40-register send alone), reps interleaved: overlapped rounds with the default copy grid and with a
# 1-block copy-out (the helpers take every message: the copy-out's HBM-bound rate).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
W="EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 150 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $O $W timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf all-overlapped placed marked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 150 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf all-overlapped 1-block copy rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -A3 FAILED $OUT/conformance-*.txt /tmp/c2.txt /tmp/c3.txt | head -20 >> $OUT/rc.txt
for f in fp8 bf16; do env $O timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f overlapped rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 4 --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak4 bf16 overlapped 8-block copy rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > /tmp/r.txt 2>&1; echo "racecheck soak2 fp8 overlapped 8-block copy rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' /tmp/r.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
for rep in 1 2; do
  for t in 4096 2048 1024; do for f in bf16 fp8; do for blocks in default 1; do
    e="EP_CUDA_OVERLAP_MIN_TOKENS=1"; [ $blocks = 1 ] && e="$e EP_CUDA_OVERLAP_COPY_BLOCKS=1"
    for build in base . ; do
      b "rep $rep $t $f overlapped copy blocks $blocks build $build"
      env $e timeout 60 $build/ep-gpu bench --backend cuda --ranks 2 --tokens $t --format $f --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
    done
  done; done; done
done
tail -n 20 $OUT/ab.txt
