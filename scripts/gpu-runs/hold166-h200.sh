#!/usr/bin/env bash
# v43 call 1, one H200: the Spread hold's word reloaded once the row is in (hold/), that plus every receiving block
# touching each sender's first message's mark at its start (., the touch), the hold off (nohold/), against base/ =
# ce836e0 (v42 as reviewed). The suite on . (default and single-launch), a memcheck soak; reps interleaved at the Spread
# sizes; traces of rank 0 at 1 token BF16.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf touch EP_CUDA_LOG_WAITS=1
conf touch-single $S
sanitize touch bf16 memcheck
ab 3 "1 1 bf16" "1 1 fp8" "2 1 bf16" "2 1 fp8" "1 8 fp8" "1 32 fp8" -- a-base:base b-nohold:nohold c-hold:hold d-touch:.
traces base:base nohold:nohold hold:hold touch:. -- "1 1 bf16" "2 1 bf16"
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
