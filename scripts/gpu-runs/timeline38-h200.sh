#!/usr/bin/env bash
# v28, call 1: the prefill dispatch's timelines from the trace buffer (943e1e6: stamps recorded in device memory,
# not printed, so block lives are times), rank 0, 5 rounds each: BF16 4096 overlapped (default) and sequential
# (EP_CUDA_OVERLAP_MIN_TOKENS=0: the send alone), FP8 4096 (default, placed own rows), FP8 1024 (sequential), plus
# untraced reps of the same scenarios for the trace's cost. scripts/trace_grid.py summarises each.
cd "$(dirname "$0")"
b() { ./ep-gpu bench --backend cuda --passes 1 --breakdown "$@" 2>&1 | grep -E "^t[0-9]|ceiling|floor"; }
{
for s in "4096 bf16" "4096 fp8" "1024 fp8"; do set -- $s; echo "== untraced $1 $2"; b --tokens $1 --format $2; done
echo "== untraced 4096 bf16 sequential"; EP_CUDA_OVERLAP_MIN_TOKENS=0 b --tokens 4096 --format bf16
} > $OUT/untraced.txt
t() { # name, env, tokens, format
  env $2 EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 timeout 120 ./ep-gpu bench --backend cuda --tokens $3 --format $4 --passes 1 --rounds 5 > /tmp/trace-$1.txt 2>&1
  echo "== $1 ($2, $3 tokens $4): $(grep -c '^trace' /tmp/trace-$1.txt) records; $(grep -E '^t[0-9]' /tmp/trace-$1.txt)"
  grep -v '^trace' /tmp/trace-$1.txt | grep -iE "error|dropped|panic" | head -5
  python3 trace_grid.py /tmp/trace-$1.txt 2>&1
  gzip -c /tmp/trace-$1.txt > $OUT/trace-$1.txt.gz
}
{
t bf16-4096-overlapped X=1 4096 bf16
t bf16-4096-sequential EP_CUDA_OVERLAP_MIN_TOKENS=0 4096 bf16
t fp8-4096 X=1 4096 fp8
t fp8-1024 X=1 1024 fp8
} > $OUT/grids.txt 2>&1
cat $OUT/untraced.txt $OUT/grids.txt
ls -la $OUT
