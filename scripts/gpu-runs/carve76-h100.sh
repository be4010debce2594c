#!/usr/bin/env bash
# v33 call 1, one H100: is an SM's shared-memory reconfiguration between the start gate and a decode phase's kernel on
# the path? Every kernel with EP_CUDA_SMEM_CARVEOUT=100 (max shared memory) against the driver's choice, at 1 token
# BF16 and FP8 and 128 tokens FP8, one rank alone and two ranks sharing the GPU, two reps interleaved. Then traces of
# the single-launch dispatch at 1 token BF16 and 128 tokens FP8, two ranks sharing (rank 0, every block).
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
cat $OUT/rc.txt
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 2>&1 | grep -E '^t[0-9]|rror|slices' >> $OUT/ab.txt; }
for rep in 1 2; do
  for rt in "1 1 bf16" "1 1 fp8" "1 128 fp8" "2 1 bf16" "2 1 fp8" "2 128 fp8"; do set -- $rt
    b "${1}r $2 $3 driver"; (unset EP_CUDA_SMEM_CARVEOUT; run $1 $2 $3)
    b "${1}r $2 $3 carve100"; (export EP_CUDA_SMEM_CARVEOUT=100; run $1 $2 $3)
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
for tf in "1 bf16" "128 fp8"; do set -- $tf
  EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 90 ./ep-gpu bench --backend cuda --ranks 2 --tokens $1 --format $2 --passes 1 --rounds 40 > $OUT/trace-2r-$1-$2.txt 2>&1
  echo "trace $1 $2 rc=$? $(wc -l < $OUT/trace-2r-$1-$2.txt) lines" >> $OUT/rc.txt
done
tail -n 3 $OUT/rc.txt
