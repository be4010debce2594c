#!/usr/bin/env python3
"""Timelines of the prefill dispatch's grids from the stamps EP_CUDA_TRACE=all prints (common.cuh).

Usage: EP_CUDA_TRACE=all EP_CUDA_TRACE_RANK=0 ep bench --backend cuda --tokens 4096 --passes 1 \
           --rounds 5 > trace.txt
       python3 scripts/trace_grid.py trace.txt [round.png] [--windows US] [--round N]

trace_summary.py asks which block held a decode launch; at prefill sizes a grid has thousands of
blocks and the question is how busy the GPU was: how many blocks were alive at once, how long
each lived and in which step. A round starts at its `assign` launch (ep_assign_slots); the `send`
(ep_dispatch_send) and `copy` (the overlapped ep_dispatch_copy_messages; `helper`: its launch after
the send) launches up to the next `assign` belong to it. For each kernel, medians over rounds: its first block start and last block
end from the round's start, the blocks, their median life and steps, and how many blocks were
alive at once (their lives summed over the launch's span; per SM the SMs it used), then the share
of the launch's blocks finished by each tenth of its span, and which blocks finished last. `msg`
lines are the copy-out's messages, one each (taken, mark seen, rows written). With a second
argument it plots one round of each rank (`--round`, default the middle one): what was alive at
once, and the share done. `--windows US` prints that round in windows of US µs: send blocks
ended, alive at once, and the median life and steps of those started; the copy-out's messages
copied, and how many were waiting for their mark and being written at once.
"""
import argparse
import collections
import statistics as st

from trace_summary import parse_blocks  # the same lines, read one way
# The stamps each kernel sets (common.cuh's EP_STAMP numbers) and what they mean, in order.
STEPS = {
    "assign": [(1, "slots assigned"), (2, "counts published (last block)")],
    "send": [(1, "route loaded"), (12, "row here"), (21, "encoded"), (13, "message ready"), (14, "stores issued"),
             (22, "marks' barrier"), (23, "fence passed"), (3, "own rows written"), (2, "end")],
    "copy": [(9, "first mark seen"), (15, "first message copied"), (2, "end")],
    # A message a copy-out team took (ep_copy_message): taken at its start, then these.
    "msg": [(1, "mark seen"), (2, "rows written")],
}
STEPS["helper"] = STEPS["copy"]  # the same kernel, launched again after the send


def plot_round(round_, rank, path):
    """One round's timeline: per µs from the round's start, the send blocks alive, the copy-out's
    messages in hand (waiting for their mark, and being written), and the share of each done."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t0, r = round_
    end = max((b[0] - t0) * 1e-3 + max(b[4]) for k in r for b in r[k])
    bins = int(end) + 2
    def spans(kernel, a, b):  # (start, end) µs of each record between its stamps a and b (0: start)
        out = []
        for x in r.get(kernel, []):
            s = (x[0] - t0) * 1e-3
            lo = s + (x[4][a - 1] if a else 0.0)
            hi = s + (max(x[4]) if b is None else x[4][b - 1])
            if lo <= hi:
                out.append((lo, hi))
        return out
    def alive(sp):
        c = [0] * bins
        for lo, hi in sp:
            for t in range(int(lo), int(hi) + 1):
                c[t] += 1
        return c
    def done(sp):
        c = [0] * bins
        for _, hi in sp:
            c[int(hi) + 1 if int(hi) + 1 < bins else bins - 1] += 1
        tot, out = 0, []
        for v in c:
            tot += v
            out.append(100.0 * tot / max(len(sp), 1))
        return out
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 10), sharex=True)
    xs = list(range(bins))
    for kernel, label in (("assign", "ep_assign_slots blocks alive"), ("send", "ep_dispatch_send blocks alive")):
        if r.get(kernel):
            ax1.plot(xs, alive(spans(kernel, 0, None)), label=label)
    if r.get("msg"):
        ax1.plot(xs, alive(spans("msg", 0, 1)), label="copy-out messages waiting for their mark")
        ax1.plot(xs, alive(spans("msg", 1, 2)), label="copy-out messages being written")
    ax1.set_ylabel("at once")
    ax1.legend(fontsize=8)
    for kernel, label in (("send", "send blocks ended"), ("msg", "messages copied")):
        if r.get(kernel):
            ax2.plot(xs, done(spans(kernel, 0, None)), label=label)
    ax2.set_ylabel("% done")
    ax2.legend(fontsize=8)
    # How long each send block and each message took, by when it started: a block whose life
    # grows as the copy-out gets going shares something with it.
    for kernel, label in (("send", "send block life"), ("msg", "message: mark seen to rows written")):
        sp = spans(kernel, 0, None) if kernel == "send" else spans(kernel, 1, 2)
        if sp:
            ax3.scatter([lo for lo, _ in sp], [hi - lo for lo, hi in sp], s=2, label=label)
    ax3.set_ylabel("µs")
    ax3.set_xlabel("µs from the round's first ep_assign_slots block")
    ax3.legend(fontsize=8, markerscale=4)
    fig.suptitle(f"one dispatch round, rank {rank} (EP_CUDA_TRACE=all)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"rank {rank}: plotted a round to {path}")


def windows(round_, width):
    """One round in windows of `width` µs (see the module's doc)."""
    t0, r = round_
    def spans(kernel):
        return [((x[0] - t0) * 1e-3, (x[0] - t0) * 1e-3 + max(x[4]), x[4]) for x in r.get(kernel, [])]
    def at_once(sp, t):
        return sum(max(0.0, min(hi, t + width) - max(lo, t)) for lo, hi in sp) / width
    send, msg = spans("send"), spans("msg")
    waiting = [(lo, lo + x[0]) for lo, _, x in msg]
    writing = [(lo + x[0], hi) for lo, hi, x in msg]
    end = max((hi for _, hi, _ in send + msg), default=0.0)
    names = [name for i, name in STEPS["send"][:4]]
    print(f"  windows of {width:g} us: start | send ended, alive, life and steps ({', '.join(names)}) of those "
          "started | messages copied, waiting for a mark, being written")
    t = 0.0
    while t < end:
        started = [x for x in send if t <= x[0] < t + width]
        life = f"{st.median(hi - lo for lo, hi, _ in started):6.2f} " + " ".join(
            f"{st.median(x[2][i - 1] for x in started):5.2f}" for i, _ in STEPS["send"][:4]) if started else ""
        print(f"  {t:6.0f} | {sum(t <= hi < t + width for _, hi, _ in send):5d} {at_once([(a, b) for a, b, _ in send], t):6.1f} "
              f"{life:31} | {sum(t <= hi < t + width for _, hi, _ in msg):5d} {at_once(waiting, t):6.1f} "
              f"{at_once(writing, t):6.1f}")
        t += width


def main(path, plot=None, width=None, which=None):
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
        chosen = rounds[len(rounds) // 2 if which is None else which]
        if plot:
            plot_round(chosen, rank, plot)
        if width:
            windows(chosen, width)
        for kernel in ("assign", "send", "copy", "helper", "msg"):
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
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("png", nargs="?")
    ap.add_argument("--windows", type=float, help="print one round in windows of this many us")
    ap.add_argument("--round", type=int, help="the round to plot and print in windows (default: the middle one)")
    a = ap.parse_args()
    main(a.trace, a.png, a.windows, a.round)
