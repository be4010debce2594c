#!/usr/bin/env bash
# v30, one H100: slots assigned per chunk of 128 tokens (15b8988). Suites over every world of 2, 4 and 8 ranks (defaults;
# every phase multi-kernel, so every dispatch takes ep_assign_slots; every dispatch overlapped, placed and marked),
# memcheck and racecheck on rounds_many_tokens (multi-kernel) and on multi-kernel soaks, 8-rank multi-kernel soaks; then
# 2 ranks on the one GPU against v29/ (993a406), reps interleaved, with --breakdown (the assign kernel's time).
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
M="EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_SINGLE_COMBINE_MAX_TOKENS=0"
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1"
timeout 170 ./ep-gpu conformance --backend cuda > $OUT/conformance-cuda-h100.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance-cuda-h100.txt)" >> $OUT/rc.txt
env $M timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf multi-kernel rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
env $O timeout 170 ./ep-gpu conformance --backend cuda > /tmp/c3.txt 2>&1; echo "conf overlapped placed marked rc=$? $(tail -n 1 /tmp/c3.txt)" >> $OUT/rc.txt
grep -h -B2 -A6 -E 'FAILED|FAIL ' $OUT/conformance-*.txt /tmp/c2.txt /tmp/c3.txt | head -40 >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/m1.txt 2>&1; echo "memcheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|passed' /tmp/m1.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 150 ./ep-gpu conformance --backend cuda --filter rounds_many_tokens > /tmp/r1.txt 2>&1; echo "racecheck rounds_many_tokens multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|passed' /tmp/r1.txt | tr '\n' ' ')" >> $OUT/rc.txt
for f in fp8 bf16; do env $M timeout 60 ./ep-gpu soak --backend cuda --ranks 8 --rounds 300 --format $f > /tmp/s.txt 2>&1; echo "soak8 $f multi-kernel rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
env $M EP_WRAP="compute-sanitizer --tool memcheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 4 --rounds 10 --format bf16 > /tmp/m.txt 2>&1; echo "memcheck soak4 bf16 multi-kernel rc=$? $(grep -E 'ERROR SUMMARY|rounds matched' /tmp/m.txt | tr '\n' ' ')" >> $OUT/rc.txt
env $M EP_WRAP="compute-sanitizer --tool racecheck --print-limit 10" timeout 120 ./ep-gpu soak --backend cuda --ranks 2 --rounds 10 --format fp8 > /tmp/r.txt 2>&1; echo "racecheck soak2 fp8 multi-kernel rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|rounds matched' /tmp/r.txt | tr '\n' ' ')" >> $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
for rep in 1 2; do for t in 4096 512; do for f in bf16 fp8; do for build in v29 . ; do
  b "rep $rep $t $f build $build"
  timeout 60 $build/ep-gpu bench --backend cuda --ranks 2 --tokens $t --format $f --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
done; done; done; done
cat $OUT/ab.txt
