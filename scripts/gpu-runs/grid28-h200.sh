#!/usr/bin/env bash
# FP8's overlapped copy grid, uniform against skewed routing (call 7: under skew 2 blocks per SM read 274 us against
# 297-302 for 5/3; uniform, call 3, 222 against 211.5). ./ = 7383463 (5/3 per SM = 220 blocks); g242/ and g264/ = the
# same with 11/6 and 2 per SM as the default. A/B at 4096 FP8 uniform and skewed via EP_CUDA_OVERLAP_COPY_BLOCKS,
# interleaved, two reps; then a sweep of each variant build.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 > $OUT/rc.txt
one() { # label skew env...
  local label=$1 skew=$2; shift 2
  env "$@" timeout 60 ./ep-gpu bench --backend cuda --tokens 4096 --format fp8 $skew --passes 1 --breakdown > /tmp/b.txt 2>&1
  echo "$label $(grep -E '^t[0-9]' /tmp/b.txt | head -1 | awk '{print $1, $2, $3, $4, $5}') | $(grep -E '^t[0-9].*\|' /tmp/b.txt | head -1 | cut -c24-)" | tee -a $OUT/ab.txt
}
for rep in 1 2; do
  for skew in "" --skewed; do
    one g220 "$skew" X=1
    one g242 "$skew" EP_CUDA_OVERLAP_COPY_BLOCKS=242
    one g264 "$skew" EP_CUDA_OVERLAP_COPY_BLOCKS=264
  done
done
for v in g242 g264; do
  timeout 200 $v/ep-gpu bench --backend cuda --sweep --breakdown --out $OUT/sweep-$v.json > /tmp/sweep.txt 2>&1; echo "sweep $v rc=$?" >> $OUT/rc.txt
done
cat $OUT/rc.txt
