#!/usr/bin/env python3
"""Summarises the stamps the kernels record under EP_CUDA_TRACE (common.cuh; `ep bench` prints them).

Usage: EP_CUDA_TRACE=all ep bench --backend cuda --tokens N --passes 1 --rounds 40 > trace.txt
       python3 scripts/trace_summary.py trace.txt

Each printed line is one block of one launch: its start (%globaltimer, ns) and the µs from there
to each stamp (-1: not reached). Lines are grouped into launches per (kernel, rank) by their start
times. For every launch the times are taken from the launch's first block start, so that a block
that starts late, or waits long, shows; then the medians over the launches are printed: for each
stamp, the median over the blocks, the last block to reach it, and the block that published the
counts (the single-launch dispatch's counting block runs apart from the senders). With
EP_CUDA_TRACE=1 (block 0 and the publishing block only) the same table covers those two blocks.
Under EP_CUDA_TRACE `ep bench` also prints when each start gate let its phase go: the summary
gives the time from there to the phase kernel's first block start (its launch latency).
"""
import collections
import re
import statistics as st
import sys
from typing import NamedTuple, Optional

LINE = re.compile(r"trace (\w+) rank (\d+) block (\d+)(?: sm (\d+))? pub (\d) start (\d+): ((?:-?\d+\.\d+ ?){11,31})")
GATE = re.compile(r"trace gate rank (\d+) epoch (\d+) end (\d+)")
LAUNCH_GAP_NS = 20_000  # blocks of one launch start within a few µs; rounds are further apart


class Block(NamedTuple):
    """One printed line: a block of one launch. `sm` is None in traces from before it was printed;
    `stamps[i]` is the µs from `start` (ns, %globaltimer) to stamp i + 1, -1 when not reached."""
    kernel: str
    rank: int
    block: int
    sm: Optional[int]
    published: int
    start: int
    stamps: list


def parse_blocks(text):
    """Every block line of a trace (trace_grid.py reads them with this too)."""
    for m in LINE.finditer(text):
        yield Block(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)) if m.group(4) else None,
                    int(m.group(5)), int(m.group(6)), [float(x) for x in m.group(7).split()])


def launches(blocks):
    """Splits one (kernel, rank)'s blocks, sorted by start, where the starts jump."""
    out, cur = [], []
    for b in sorted(blocks, key=lambda b: b[1]):
        if cur and b[1] - cur[0][1] > LAUNCH_GAP_NS:
            out.append(cur)
            cur = []
        cur.append(b)
    if cur:
        out.append(cur)
    return out


def main(path):
    text = open(path, errors="replace").read()
    per = collections.defaultdict(list)
    for b in parse_blocks(text):
        per[(b.kernel, b.rank)].append((b.block, b.start, b.published, b.stamps))
    # Start gates (bench.cu, printed by the host after each round): per rank, when each one let its
    # phase go, to time a launch from its gate. (Not the ranks' skew: %globaltimer is per GPU,
    # and two H200s' clocks read ~0.5 s apart.)
    gate_ends = collections.defaultdict(list)
    for m in GATE.finditer(text):
        r, end = int(m.group(1)), int(m.group(3))
        gate_ends[r].append(end)
    for r in gate_ends:
        gate_ends[r].sort()
    for (kernel, rank), blocks in sorted(per.items()):
        runs = launches(blocks)
        n_stamps = max(i + 1 for b in blocks for i, x in enumerate(b[3]) if x >= 0)
        med = [[] for _ in range(n_stamps)]
        last = [[] for _ in range(n_stamps)]
        last_block = [collections.Counter() for _ in range(n_stamps)]
        pub = [[] for _ in range(n_stamps)]  # the publishing (counting) block, which runs apart
        spans, start_spread, sizes, from_gate = [], [], [], []
        for run in runs:
            t0 = run[0][1]
            before = [end for end in gate_ends.get(rank, []) if end <= t0]
            if before:
                from_gate.append((t0 - before[-1]) * 1e-3)
            sizes.append(len(run))
            start_spread.append((run[-1][1] - t0) * 1e-3)
            ends = []
            for i in range(n_stamps):
                at = [((b[1] - t0) * 1e-3 + b[3][i], b[0], b[2]) for b in run if b[3][i] >= 0]
                if not at:
                    continue
                med[i].append(st.median(a for a, _, _ in at))
                pub[i] += [a for a, _, published in at if published]
                worst = max(at)
                last[i].append(worst[0])
                last_block[i][worst[1]] += 1
                ends.append(worst[0])
            spans.append(max(ends))
        print(f"{kernel} rank {rank}: {len(runs)} launches of {st.median(sizes):.0f} printing blocks; "
              f"span (first start to last stamp) {st.median(spans):.2f} us, block starts spread over "
              f"{st.median(start_spread):.2f} us (medians over launches)")
        if from_gate:
            print(f"  from its start gate's end to the first block start: {st.median(from_gate):.2f} us "
                  f"(p90 {sorted(from_gate)[int(0.9 * (len(from_gate) - 1))]:.2f})")
        print("  stamp   median block   last block   publishing block   (most often the last)")
        for i in range(n_stamps):
            if not med[i]:
                continue
            common = ", ".join(f"{b} x{c}" for b, c in last_block[i].most_common(3))
            p = f"{st.median(pub[i]):16.2f}" if pub[i] else " " * 16
            print(f"  {i + 1:5}   {st.median(med[i]):12.2f}   {st.median(last[i]):10.2f}   {p}   ({common})")


if __name__ == "__main__":
    main(sys.argv[1])
