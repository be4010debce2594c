#!/usr/bin/env bash
# v29 review on 2x H200: the helpers after a lean send take the full-batch copy kernel (ep_dispatch_copy_messages, 64
# registers, 8 pieces a lane) instead of the lean one (. here: a change to comm/dispatch.rs tried in the review, not committed, since it was no faster) against 245d216 (base/). The suite
# with every dispatch overlapped and lean on a 1-block copy-out (the helpers take nearly every message); then 4096 and
# 2560 tokens BF16, uniform and skewed, reps interleaved.
cd "$(dirname "$0")"
export EP_CUDA_LOG_WAITS=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
env EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=0 EP_CUDA_LEAN_MIN_TOKENS=1 EP_CUDA_OVERLAP_COPY_BLOCKS=1 timeout 100 ./ep-gpu conformance --backend cuda > /tmp/c.txt 2>&1; echo "conf all-overlapped lean 1-block copy rc=$? $(tail -n 1 /tmp/c.txt)" >> $OUT/rc.txt
cat $OUT/rc.txt
for rep in 1 2; do for s in "4096 bf16" "4096 bf16 --skewed" "2560 bf16"; do for build in base . ; do
  set -- $s
  echo "== rep $rep $s build $build" >> $OUT/ab.txt
  timeout 60 $build/ep-gpu bench --backend cuda --tokens $1 --format $2 $3 --passes 1 2>&1 | grep -E '^t[0-9]' >> $OUT/ab.txt
done; done; done
cat $OUT/ab.txt
