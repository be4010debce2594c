#!/usr/bin/env python3
"""Print an `ep bench` JSON file as `ep bench` prints it: the run's header, the table and, when
recorded, the per-kernel breakdown. For results whose stdout did not come back from the GPU host.

    python3 scripts/bench_table.py bench/results/<device>-<date>.json
"""
import json
import sys
from pathlib import Path


def num(v, digits):
    return "-" if v is None else f"{v:.{digits}f}"


def main(path):
    d = json.loads(Path(path).read_text())
    sc = d["scenarios"]
    print(f"ep bench on {d['device']} ({d['backend']} backend): {d['ranks']} ranks, hidden {d['hidden']}, "
          f"top-{d['top_k']}, {d['experts']} experts, {len(sc)} scenario(s)")
    c = d["ceiling"]
    parts = []
    if c.get("all_to_all_gbps") is not None:
        parts.append(f"all-to-all copy {c['all_to_all_gbps']:.0f} GB/s sent per GPU (the ceiling)")
    if c.get("p2p_gbps") is not None:
        parts.append(f"peer-to-peer copy {c['p2p_gbps']:.0f} GB/s one way")
    if c.get("local_gbps") is not None:
        parts.append(f"local copy {c['local_gbps']:.0f} GB/s")
    if c.get("memcpy_gbps") is not None:
        parts.append(f"memcpy {c['memcpy_gbps']:.1f} GB/s")
    print("ceiling: " + ", ".join(parts))
    cols = ["scenario", "disp us", "p95", "comb us", "p95", "disp GB/s", "comb GB/s", "d/ceil", "c/ceil",
            "nccl d us", "nccl c us", "nccl/d", "nccl/c"]
    widths = [-22, 10, 10, 10, 10, 9, 9, 8, 8, 10, 10, 7, 7]
    line = lambda vals: " ".join(f"{v:<{-w}}" if w < 0 else f"{v:>{w}}" for v, w in zip(vals, widths))
    print()
    print(line(cols))
    for r in sc:
        print(line([r["name"], num(r["dispatch_us"], 1), num(r.get("dispatch_p95_us"), 1), num(r["combine_us"], 1),
                    num(r.get("combine_p95_us"), 1), num(r["dispatch_gbps_remote"], 1),
                    num(r["combine_gbps_remote"], 1), num(r["dispatch_vs_ceiling"], 2),
                    num(r["combine_vs_ceiling"], 2), num(r.get("nccl_dispatch_us"), 1),
                    num(r.get("nccl_combine_us"), 1), num(r.get("nccl_over_ours_dispatch"), 2),
                    num(r.get("nccl_over_ours_combine"), 2)]))
    print("(times: slowest rank per round, median and p95 over the measured rounds; GB/s: remote share, DeepEP "
          "convention; ceil: measured in this run)")
    for r in sc:
        if r.get("breakdown_us"):
            steps = " | ".join(f"{b['step']} {b['median_us']:.1f}" for b in r["breakdown_us"])
            print(f"{r['name']:<22} {steps}")


if __name__ == "__main__":
    main(sys.argv[1])
