#!/usr/bin/env bash
# After v26 (7383463: 35d7718 + `bench --skewed`): the sweep again, on the code as submitted (the committed sweep is
# 12476b5's; 35d7718 changed ep_assign_slots only), then the FP8 overlapped copy grid under skewed routing at 4096 tokens
# (the sweep's FP8 4096 skewed median read 274.9 -> 288.0 us against v22), interleaved, two reps.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
timeout 300 ./ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep.json > /tmp/sweep.txt 2>&1; echo "sweep rc=$?" >> $OUT/rc.txt
one() { # label tokens format env...
  local label=$1 tok=$2 fmt=$3; shift 3
  env "$@" timeout 60 ./ep-gpu bench --backend cuda --tokens $tok --format $fmt --skewed --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$label $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  one v22shape 4096 fp8 EP_CUDA_SEND_THREADS=512 EP_CUDA_OVERLAP_COPY_THREADS=512 EP_CUDA_OVERLAP_COPY_BLOCKS=66
  one g176 4096 fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=176
  one g220 4096 fp8 X=1
  one g264 4096 fp8 EP_CUDA_OVERLAP_COPY_BLOCKS=264
  one bf16-default 4096 bf16 X=1
done
cat $OUT/rc.txt
