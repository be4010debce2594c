#!/usr/bin/env python3
"""Compare two `ep bench --sweep` runs: for every scenario and phase, is the second run's median
inside the first run's [p5, p95] spread (and the other way round)? Exits non-zero if a median
falls outside both spreads.

    python3 scripts/compare_bench.py FIRST.json SECOND.json
"""
import json
import sys


def load(p):
    return {s["name"]: s for s in json.load(open(p))["scenarios"]}


def main(a_path, b_path):
    a, b = load(a_path), load(b_path)
    bad = 0
    for name in a:
        for phase in ("dispatch", "combine"):
            sa, sb = a[name][f"{phase}_stats_us"], b[name][f"{phase}_stats_us"]
            inside = sa["p5"] <= sb["median"] <= sa["p95"] or sb["p5"] <= sa["median"] <= sb["p95"]
            drift = (sb["median"] - sa["median"]) / sa["median"]
            flag = "ok " if inside else "OUT"
            bad += not inside
            print(f"{flag} {name:<22} {phase:<8} {sa['median']:9.1f} us [{sa['p5']:.1f}, {sa['p95']:.1f}]  vs  {sb['median']:9.1f} us [{sb['p5']:.1f}, {sb['p95']:.1f}]  ({drift:+.1%})")
    total = 2 * len(a)
    print(f"\n{total - bad} of {total} medians within the other run's p5-p95 spread")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
