#!/usr/bin/env python3
"""Compare two `ep bench --sweep` runs: for every scenario and phase, is one run's median inside
the other run's [p5, p95] spread, and do the two spreads overlap? Exits non-zero if two spreads
do not overlap.

    python3 scripts/compare_bench.py FIRST.json SECOND.json
"""
import json
import sys


def load(p):
    return {s["name"]: s for s in json.load(open(p))["scenarios"]}


def main(a_path, b_path):
    a, b = load(a_path), load(b_path)
    bad = outside = 0
    for name in a:
        for phase in ("dispatch", "combine"):
            sa, sb = a[name][f"{phase}_stats_us"], b[name][f"{phase}_stats_us"]
            inside = sa["p5"] <= sb["median"] <= sa["p95"] or sb["p5"] <= sa["median"] <= sb["p95"]
            overlap = sa["p5"] <= sb["p95"] and sb["p5"] <= sa["p95"]
            drift = (sb["median"] - sa["median"]) / sa["median"]
            flag = "ok " if inside else ("~  " if overlap else "OUT")
            outside += not inside
            bad += not overlap
            print(f"{flag} {name:<22} {phase:<8} {sa['median']:9.1f} us [{sa['p5']:.1f}, {sa['p95']:.1f}]  vs  {sb['median']:9.1f} us [{sb['p5']:.1f}, {sb['p95']:.1f}]  ({drift:+.1%})")
    total = 2 * len(a)
    print(f"\n{total - outside} of {total} medians within the other run's p5-p95 spread")
    print(f"{total - bad} of {total} p5-p95 spreads overlap (~: overlapping, median just outside)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
