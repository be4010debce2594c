#!/usr/bin/env bash
# v32 call 1, one H100, env only on HEAD: at the mid sizes (256-1024 tokens), where the dispatch trails NCCL, does the
# rank's own half of the copy-out pay to move into the send (the early-count protocol: the assign publishes the counts,
# the layout is known before the send blocks store, each writes its own rows, and after the send the copy-out has only
# the peers' messages left)? Variants: D the defaults; O overlapped with its default grid; OW overlapped on a one-block
# copy-out beside the send, every send block waiting for the layout and writing its own rows (the nearest the env comes
# to a sequential early chain). One rank alone and two sharing the GPU; two reps interleaved; --breakdown.
cd "$(dirname "$0")"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
O="EP_CUDA_OVERLAP_MIN_TOKENS=1"
OW="EP_CUDA_OVERLAP_MIN_TOKENS=1 EP_CUDA_OVERLAP_COPY_BLOCKS=1 EP_CUDA_OWN_ROWS=1 EP_CUDA_OWN_ROWS_WAIT_NS=200000"
b() { echo "== $*" >> $OUT/ab.txt; }
run() { timeout 60 ./ep-gpu bench --backend cuda --ranks $1 --tokens $2 --format $3 --passes 1 --breakdown 2>&1 | grep -E '^t[0-9]|rror|ep_' >> $OUT/ab.txt; }
for rep in 1 2; do
  for r in 1 2; do
    for tf in "256 fp8" "512 fp8" "1024 fp8" "512 bf16"; do
      set -- $tf
      b "${r}r $1 $2 D"; run $r $1 $2
      b "${r}r $1 $2 O"; (export $O; run $r $1 $2)
      b "${r}r $1 $2 OW"; (export $OW; run $r $1 $2)
    done
  done
done
awk '/^==/{l=$0; next} /^t[0-9]+-[a-z0-9]+-[a-z]+ +[0-9]/{ print l, "|", $2, $3, $4, $5; next} {print l, "|", $0}' $OUT/ab.txt | sort -s -k2,4 > $OUT/summary.txt
cat $OUT/summary.txt
