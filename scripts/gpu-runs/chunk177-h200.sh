#!/usr/bin/env bash
# v44 call 7, one H200: . = ca84eca (v44 after the duplicates review: ep_chunk_rows shared by both message copies)
# against base/ = c8525fa (call 5's v44). The suite in the four path modes, sanitizers, soaks, a few reps.
cd "$(dirname "$0")"
. ./lib.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/rc.txt
conf_modes chunk
sanitize_with "$S" "chunk single-launch" bf16 memcheck racecheck
memcheck "chunk defaults 4r" 4 6
soak "fp8 single-launch" 3 100 fp8 $S
ab 2 "1 1 bf16" "1 128 fp8" "2 256 fp8" "1 1024 bf16" -- a-c8525fa:base b-chunk:.
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
