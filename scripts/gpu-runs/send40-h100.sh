#!/usr/bin/env bash
# v29: the multi-kernel send's stores a piece at a time from shared memory (40 registers a thread, was 62) on one H100:
# suites over every world of 2, 4 and 8 ranks (defaults; every dispatch overlapped, the send blocks waiting for the layout
# and every combine marked; every dispatch overlapped on a 1-block copy-out), 8-rank overlapped soaks, memcheck and
# racecheck on overlapped soaks; then 2 ranks on the one GPU against base/ (the build before), reps interleaved.
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
# Timing: 2 ranks on the one GPU, reps interleaved, base/ then this build.
b() { echo "== $*" >> $OUT/ab.txt; }
for rep in 1 2; do
  for t in 4096 1024 512; do for f in bf16 fp8; do for mode in overlapped sequential; do
    e=""; [ $mode = sequential ] && e="EP_CUDA_OVERLAP_MIN_TOKENS=0"; [ $mode = overlapped ] && e="EP_CUDA_OVERLAP_MIN_TOKENS=1"
    for build in base . ; do
      b "rep $rep $t $f $mode build $build"
      env $e timeout 60 $build/ep-gpu bench --backend cuda --ranks 2 --tokens $t --format $f --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
    done
  done; done; done
  b "rep $rep 4096 bf16 overlapped, 256-thread copy blocks (beside two send blocks), this build"
  EP_CUDA_COPY_THREADS=256 timeout 60 ./ep-gpu bench --backend cuda --ranks 2 --tokens 4096 --format bf16 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
done
for t in 1 128; do for build in base . ; do b "decode $t fp8 build $build"; timeout 60 $build/ep-gpu bench --backend cuda --ranks 2 --tokens $t --format fp8 --passes 1 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt; done; done
tail -n 30 $OUT/ab.txt
