#!/usr/bin/env bash
# Prepared in v47 for the next session that is lent 2x H200 (not yet run), after sweep188-h200x2.sh, on the bundle of
# HEAD (.): two thresholds only ever measured on one GPU since v30. The single-launch dispatch at 256 tokens
# (SINGLE_DISPATCH_MAX_TOKENS is 128 from v30's 2x H200 measurement, when it was 3.5% slower there; one H200, one rank
# alone, v47 call 1: 28.0-28.5 -> 26.4-26.6 us FP8), and the layout-first chain from 512 tokens (LAYOUT_FIRST_MIN_TOKENS,
# from v32's H100 measurements; on 2x H200 the send then waits for the peer's counts before its NVLink stores).
# v48 added the FP8 send kernel (ep_dispatch_send_fp8, 40 registers) against the every-format one (EP_CUDA_SEND_FP8=0),
# measured on one H200 only, and the lean BF16 path at 1024-2048 tokens (LEAN_MIN_TOKENS_BF16 is 2560 from v29's 2x H200
# A/B, when an overlapped round's layout came late; one H200, v48 calls 9-10: 1024 tokens 72-80 -> 64-69 us one rank alone,
# 2048 two ranks sharing 274-279 -> 211-216).
# v49 added the rounds just past the overlap thresholds (BF16 1024, FP8 2048 tokens) not overlapped, where the send now
# takes 128-thread blocks that fit the grid in fewer waves (chain_send_threads; one H200, v49 call 4: one rank alone BF16
# 1024 71.8-74.8 -> 53.9-54.0 us, FP8 2048 87.6-87.9 -> 81.0-81.7; two ranks sharing BF16 1024 140.7-142.1 -> 128.1, FP8
# 2048 167.8-172.1 -> 174.8-174.9).
cd "$(dirname "$0")"
. ./lib.sh
# before SECONDS CMD...: CMD while the call has run less than SECONDS (a call stops at 600 s), else a line in rc.txt that it
# was left for the next call.
before() { local s=$1; shift; if [ $(( $(date +%s) - T0 )) -lt "$s" ]; then "$@"; else echo "left for the next call: $*" >> $OUT/rc.txt; fi; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; nvidia-smi topo -m | head -4; } > $OUT/rc.txt
ab 3 "2 256 fp8" "2 256 bf16" "2 192 fp8" -- a-head:. b-single:.,EP_CUDA_SINGLE_DISPATCH_MAX_TOKENS=256
ab 3 "2 512 fp8" "2 1024 fp8" "2 512 bf16" -- c-head:. d-nolf:.,EP_CUDA_LAYOUT_FIRST_MIN_TOKENS=0
ab 2 "2 512 fp8" "2 1024 fp8" "2 2048 fp8" "2 4096 fp8" -- e-head:. f-allfmt:.,EP_CUDA_SEND_FP8=0
ab 2 "2 1024 bf16" "2 2048 bf16" "2 2560 bf16" -- g-head:. h-lean:.,EP_CUDA_LEAN_MIN_TOKENS=1024
ab 3 "2 1024 bf16" "2 1536 bf16" "2 2048 fp8" -- i-head:. j-chain:.,EP_CUDA_OVERLAP_MIN_TOKENS=4096
# v49: the sweep once (one pass) in worlds built for 4096 tokens per rank, as a server builds one world for its largest
# batch (ep bench --max-tokens), beside the committed sweep's convention (each world built for its scenario).
sweep_cap() { timeout 200 ./ep-gpu bench --backend cuda --sweep --passes 1 --max-tokens 4096 --out $OUT/sweep-cap4096.json > $OUT/sweep-cap4096.txt 2>&1; echo "sweep cap4096 rc=$? $(elapsed)" >> $OUT/rc.txt; }
before 300 sweep_cap
# v50: the layout-first FP8 send's tail (branch exp-send-tail, 5f2bde1: each send block copies out the peers' messages of
# its index once its own token is sent; one H200, two ranks sharing, v50 call 1: level to slower), when the bundle has
# that build in tail/ (build the branch into it as into base/); its default waits 3 us for a message, 20 us here too.
if [ -x tail/ep-gpu ]; then
  before 450 ab 3 "2 512 fp8" "2 1024 fp8" "2 768 fp8" -- k-head:. l-tail:tail m-tail20:tail,EP_CUDA_SEND_TAIL_NS=20000
fi
# v51: the overlapped path for FP8 at 512-1024 tokens (OVERLAP_MIN_TOKENS is 2048 for FP8 from v20's 2x H200 A/B, when
# 512 tokens were 1-12 us slower overlapped; since then v48 runs the layout's wait beside the assign, so the send blocks
# find the layout from the start): on 2x H200 the copy-out then expands the peer's messages while the NVLink transfer
# runs, where layout-first expands them after it (v41's breakdown at 512 FP8: copy-out 15.1 us after the send).
ab 3 "2 512 fp8" "2 768 fp8" "2 1024 fp8" "2 1024 fp8 --skewed" -- n-head:. o-overlap:.,EP_CUDA_OVERLAP_MIN_TOKENS=512
# v53: the overlapped path itself at 2048-4096 tokens, against the layout-first chain (the copy-out of the peers' messages
# after the send, nothing beside it): one H200, one rank alone, v53 call 2, 4096 FP8 142.6-142.8 us overlapped against
# 136.8 layout-first, 2048 86.8-86.9 against 79.6-79.9. On 2x H200 the overlap hides that copy-out behind the NVLink
# transfer, which one GPU does not have; v20 chose it there before the layout-first chain existed (v32).
before 500 ab 2 "2 4096 fp8" "2 2048 fp8" "2 4096 bf16" -- p-head:. q-lf:.,EP_CUDA_OVERLAP_MIN_TOKENS=0
cat $OUT/rc.txt
summary | tee $OUT/summary.txt
