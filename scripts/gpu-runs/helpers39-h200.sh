#!/usr/bin/env bash
# v28, call 2: the copy-out's shared count and its helpers after the send (dcc018a) against 57ae35d (base/, v27's
# kernels). Suites first (defaults; every dispatch overlapped with a 1-block copy-out so the helpers take nearly every
# message, the rows path forced and every combine marked), an overlapped soak, then 4096-token rounds interleaved:
# BF16 base, new with 88 (default) / 66 / 44 / 33 / 22 copy blocks, new 44 without helpers; FP8 base, new with
# 198 (default) / 132 / 66; skewed for a few; then a trace of one BF16 shape.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0"
timeout 100 ./ep-gpu conformance --backend cuda > $OUT/conformance.txt 2>&1; echo "conf defaults rc=$? $(tail -n 1 $OUT/conformance.txt)" >> $OUT/rc.txt
env $O EP_CUDA_OVERLAP_COPY_BLOCKS=1 EP_CUDA_OWN_ROWS_WAIT_NS=2000000 EP_CUDA_MARKED_MIN_TOKENS=1 timeout 100 ./ep-gpu conformance --backend cuda > /tmp/c2.txt 2>&1; echo "conf overlapped 1-block copy placed marked rc=$? $(tail -n 1 /tmp/c2.txt)" >> $OUT/rc.txt
grep -h -B2 -A12 FAILED $OUT/conformance.txt /tmp/c2.txt | head -40 >> $OUT/rc.txt
for f in bf16 fp8; do env $O EP_CUDA_OVERLAP_COPY_BLOCKS=8 timeout 100 ./ep-gpu soak --backend cuda --rounds 400 --format $f > /tmp/s.txt 2>&1; echo "soak overlapped 8-block copy $f rc=$? $(tail -n 1 /tmp/s.txt)" >> $OUT/rc.txt; done
cat $OUT/rc.txt
run() { # label, build, env, tokens, format, [--skewed]
  local b=./ep-gpu; [ $2 = base ] && b=base/ep-gpu
  env $3 timeout 60 $b bench --backend cuda --tokens $4 --format $5 $6 --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$1 $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3}') | $(grep -E '^t[0-9]' /tmp/b.txt | tail -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  run "bf16 base        " base X=1 4096 bf16
  run "bf16 new 88      " new X=1 4096 bf16
  run "bf16 new 66      " new EP_CUDA_OVERLAP_COPY_BLOCKS=66 4096 bf16
  run "bf16 new 44      " new EP_CUDA_OVERLAP_COPY_BLOCKS=44 4096 bf16
  run "bf16 new 33      " new EP_CUDA_OVERLAP_COPY_BLOCKS=33 4096 bf16
  run "bf16 new 22      " new EP_CUDA_OVERLAP_COPY_BLOCKS=22 4096 bf16
  run "bf16 new 44 nohlp" new "EP_CUDA_OVERLAP_COPY_BLOCKS=44 EP_CUDA_COPY_HELPERS=0" 4096 bf16
  run "fp8 base         " base X=1 4096 fp8
  run "fp8 new 198      " new X=1 4096 fp8
  run "fp8 new 132      " new EP_CUDA_OVERLAP_COPY_BLOCKS=132 4096 fp8
  run "fp8 new 66       " new EP_CUDA_OVERLAP_COPY_BLOCKS=66 4096 fp8
done
run "bf16 base skew   " base X=1 4096 bf16 --skewed
run "bf16 new 88 skew " new X=1 4096 bf16 --skewed
run "bf16 new 44 skew " new EP_CUDA_OVERLAP_COPY_BLOCKS=44 4096 bf16 --skewed
run "bf16 new 33 skew " new EP_CUDA_OVERLAP_COPY_BLOCKS=33 4096 bf16 --skewed
run "fp8 base skew    " base X=1 4096 fp8 --skewed
run "fp8 new 198 skew " new X=1 4096 fp8 --skewed
run "fp8 new 132 skew " new EP_CUDA_OVERLAP_COPY_BLOCKS=132 4096 fp8 --skewed
run "fp8 new 66 skew  " new EP_CUDA_OVERLAP_COPY_BLOCKS=66 4096 fp8 --skewed
EP_CUDA_OVERLAP_COPY_BLOCKS=33 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 120 ./ep-gpu bench --backend cuda --tokens 4096 --format bf16 --passes 1 --rounds 5 > /tmp/t.txt 2>&1
python3 trace_grid.py /tmp/t.txt > $OUT/grid-bf16-33.txt 2>&1; gzip -c /tmp/t.txt > $OUT/trace-bf16-33.txt.gz
grep -E "^t[0-9]" /tmp/t.txt >> $OUT/grid-bf16-33.txt
