#!/usr/bin/env python3
"""Timelines of the prefill dispatch's grids from the stamps EP_CUDA_TRACE=all prints (common.cuh).

Usage: EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 ep bench --backend cuda --tokens 4096 --passes 1 \
           --rounds 5 > trace.txt
       python3 scripts/trace_grid.py trace.txt

trace_summary.py asks which block held a decode launch; at prefill sizes a grid has thousands of
blocks and the question is how busy the GPU was: how many blocks were alive at once, how long
each lived and in which step. A round starts at its `assign` launch (ep_assign_slots); the `send`
(ep_dispatch_send) and `copy` (the overlapped ep_dispatch_copy_messages) launches up to the next
`assign` belong to it. For each kernel, medians over rounds: its first block start and last block
end from the round's start, the blocks, their median life and steps, and how many blocks were
alive at once (their lives summed over the launch's span; per SM the SMs it used), then the share
of the launch's blocks finished by each tenth of its span, and which blocks finished last.
"""
import collections
import statistics as st
import sys

from trace_summary import parse_blocks  # the same lines, read one way
# The stamps each kernel sets (common.cuh's EP_STAMP numbers) and what they mean, in order.
STEPS = {
    "assign": [(1, "slots assigned"), (2, "counts published (last block)")],
    "send": [(1, "route loaded"), (12, "row here"), (13, "message ready"), (14, "stores issued"),
             (3, "own rows written"), (2, "end")],
    "copy": [(9, "first mark seen"), (15, "first message copied"), (2, "end")],
}


def main(path):
    text = open(path, errors="replace").read()
    blocks = collections.defaultdict(list)  # rank -> [(start_ns, kernel, block, sm, stamps)]
    for b in parse_blocks(text):
        blocks[b.rank].append((b.start, b.kernel, b.block, b.sm, b.stamps))
    for rank, bs in sorted(blocks.items()):
        bs.sort()
        rounds, cur = [], None
        last_assign = None
        for b in bs:
            # Blocks of one assign launch start within a few µs of each other.
            if b[1] == "assign" and (last_assign is None or b[0] - last_assign > 50_000):
                cur = collections.defaultdict(list)
                rounds.append((b[0], cur))
            if b[1] == "assign":
                last_assign = b[0]
            if cur is not None:
                cur[b[1]].append(b)
        print(f"rank {rank}: {len(rounds)} rounds")
        for kernel in ("assign", "send", "copy"):
            per = [(t0, r[kernel]) for t0, r in rounds if r.get(kernel)]
            if not per:
                continue
            first, last, n, life, alive, per_sm, sms = [], [], [], [], [], [], []
            steps = collections.defaultdict(list)
            reached = collections.defaultdict(list)  # step -> share of the launch's blocks
            tenths = [[] for _ in range(10)]
            last_blocks = collections.Counter()
            for t0, launch in per:
                starts = [(b[0] - t0) * 1e-3 for b in launch]
                ends = [(b[0] - t0) * 1e-3 + max(b[4]) for b in launch]
                lo, hi = min(starts), max(ends)
                first.append(lo)
                last.append(hi)
                n.append(len(launch))
                lives = [e - s for s, e in zip(starts, ends)]
                life.append(st.median(lives))
                alive.append(sum(lives) / max(hi - lo, 1e-9))
                used = len({b[3] for b in launch})
                sms.append(used)
                per_sm.append(alive[-1] / used)
                for i, _ in STEPS[kernel]:
                    at = [b[4][i - 1] for b in launch if b[4][i - 1] >= 0]
                    if at:
                        steps[i].append(st.median(at))
                    reached[i].append(len(at) / len(launch))
                for b in sorted(launch, key=lambda b: b[0] + 1e3 * max(b[4]))[-3:]:
                    last_blocks[b[2]] += 1
                for k in range(10):
                    edge = lo + (hi - lo) * (k + 1) / 10
                    tenths[k].append(sum(e <= edge for e in ends) / len(ends))
            print(f"  {kernel}: blocks {st.median(n):.0f} on {st.median(sms):.0f} SMs; first start "
                  f"{st.median(first):.1f} us, last end {st.median(last):.1f} us; block life {st.median(life):.2f} us; "
                  f"alive at once {st.median(alive):.1f} ({st.median(per_sm):.2f} per SM)")
            print("    median block, us from its start: " +
                  ", ".join(f"{name} {st.median(steps[i]):.2f}" for i, name in STEPS[kernel] if steps[i]))
            print("    share of blocks that reach each step: " +
                  ", ".join(f"{name} {100 * st.median(reached[i]):.0f}%" for i, name in STEPS[kernel]))
            print("    finished by each tenth of the span: " +
                  " ".join(f"{100 * st.median(t):.0f}%" for t in tenths))
            print("    blocks most often among the last three to finish: " +
                  ", ".join(f"{b} x{c}" for b, c in last_blocks.most_common(4)))


if __name__ == "__main__":
    main(sys.argv[1])
