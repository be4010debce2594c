#!/usr/bin/env python3
"""Plot issue 7's targets across versions: every committed 2x H200 sweep (`ep bench --sweep`
JSON) against the targets, the NCCL baseline and the latency floor measured in the same run.
Writes bench/results/progress-h200-x2.png (or OUT).

    python3 scripts/plot_progress.py [OUT]

The sweeps are `bench/results/history/h200-x2-*-vN*.json` (N: the version, docs/perf.md's rows)
and the current `bench/results/h200-x2-DATE.json`, whose version is read from the `(vN` in its
.txt header. Per version the plain `-vN.json` is the version's sweep (else the last by name);
repeats, experiments, reverted states and second runs are left out. Versions measured only on
one GPU have no point: the plot says which sweep is the latest.
"""
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LEFT_OUT = ("repeat", "experiment", "reverted", "run2")
# One style per kind of line, the same in every panel: BF16 (or the dispatch) circles, FP8 (or
# the combine) squares, NCCL crosses, floors black dash-dots.
COLORS = {"o-": "tab:blue", "s-": "tab:orange", "x:": "tab:green", "-.": "black"}


def sweeps():
    """{version: (path, json)} for every version with a 2x H200 sweep."""
    found = {}
    for p in sorted((RESULTS / "history").glob("h200-x2-*-v*.json")):
        m = re.search(r"-v(\d+)(.*)\.json$", p.name)
        if not m or any(w in p.name for w in LEFT_OUT):
            continue
        v, plain = int(m.group(1)), m.group(2) == ""
        if v not in found or plain or not found[v][1]:
            found[v] = (p, plain)
    for p in sorted(RESULTS.glob("h200-x2-????-??-??.json")):
        header = p.with_suffix(".txt").read_text().splitlines()[0] if p.with_suffix(".txt").exists() else ""
        m = re.search(r"\(v(\d+)", header)
        if m:
            found[int(m.group(1))] = (p, True)
    return {v: (p, json.loads(p.read_text())) for v, (p, _) in sorted(found.items())}


def scenario(d, tokens, fmt, routing="uniform"):
    for s in d["scenarios"]:
        if s["tokens_per_rank"] == tokens and s["format"] == fmt and s["routing"] == routing:
            return s
    return None


def series(runs, pick):
    """(versions, values) where `pick(json)` gives a value."""
    xs, ys = [], []
    for v, (_, d) in runs.items():
        y = pick(d)
        if y is not None:
            xs.append(v)
            ys.append(y)
    return xs, ys


def field(tokens, fmt, key, scale=1.0):
    def pick(d):
        s = scenario(d, tokens, fmt)
        return None if s is None or s.get(key) is None else s[key] * scale

    return pick


def floor(key):
    def pick(d):
        f = (d.get("ceiling") or {}).get("floors")
        return f[key] if f else None

    return pick


def worst_ratio(phase, max_tokens):
    """The smallest NCCL time over ours (>1: ep faster) over the run's scenarios up to
    `max_tokens` tokens per rank."""

    def pick(d):
        r = [s[f"nccl_over_ours_{phase}"] for s in d["scenarios"]
             if s["tokens_per_rank"] <= max_tokens and s.get(f"nccl_over_ours_{phase}")]
        return min(r) if r else None

    return pick


def panel(ax, runs, title, lines, target=None, target_label="target", ylabel="µs", extra=None, log=False):
    for label, pick, style in lines:
        xs, ys = series(runs, pick)
        if xs:
            ax.plot(xs, ys, style, label=label, markersize=4, color=COLORS.get(style))
    if target is not None:
        ax.axhline(target, color="tab:green", linestyle="--", linewidth=1.2, label=target_label)
    if extra:
        extra(ax)
    if log:
        # The first versions were 5-10x slower: on a linear axis the last ones sit on the floor.
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def main(out):
    runs = sweeps()
    if not runs:
        sys.exit("no 2x H200 sweeps under bench/results")
    last_v, (last_p, _) = max(runs.items())
    fig, axes = plt.subplots(2, 4, figsize=(20, 9), sharex=True)
    a = axes.flat
    panel(next(a), runs, "decode 1 token: dispatch (target ≤ 10 µs)", [
        ("ep BF16", field(1, "bf16", "dispatch_us"), "o-"),
        ("ep FP8", field(1, "fp8", "dispatch_us"), "s-"),
        ("NCCL BF16", field(1, "bf16", "nccl_dispatch_us"), "x:"),
        ("floor: row + flag exchange", floor("row_exchange_us"), "-."),
    ], target=10, log=True)
    panel(next(a), runs, "decode 1 token: combine (target ≤ 10 µs)", [
        ("ep BF16", field(1, "bf16", "combine_us"), "o-"),
        ("ep FP8 dispatch's rows", field(1, "fp8", "combine_us"), "s-"),
        ("floor: row + flag exchange", floor("row_exchange_us"), "-."),
    ], target=10, log=True)
    panel(next(a), runs, "decode 128 tokens: dispatch (FP8 target ≤ 20 µs)", [
        ("ep BF16", field(128, "bf16", "dispatch_us"), "o-"),
        ("ep FP8", field(128, "fp8", "dispatch_us"), "s-"),
        ("NCCL FP8", field(128, "fp8", "nccl_dispatch_us"), "x:"),
    ], target=20, log=True)
    panel(next(a), runs, "decode 128 tokens: combine (BF16 target ≤ 25 µs)", [
        ("ep, BF16 dispatch's rows", field(128, "bf16", "combine_us"), "o-"),
        ("ep, FP8 dispatch's rows", field(128, "fp8", "combine_us"), "s-"),
    ], target=25, log=True, extra=lambda ax: ax.axhline(28, color="tab:red", linestyle=":", linewidth=1,
                                              label="~floor under the contract (7.3 MB + latency)"))
    panel(next(a), runs, "prefill 4096: dispatch, % of the ceiling (target ≥ 90%)", [
        ("ep BF16", field(4096, "bf16", "dispatch_vs_ceiling", 100), "o-"),
        ("ep FP8", field(4096, "fp8", "dispatch_vs_ceiling", 100), "s-"),
    ], target=90, ylabel="% of the measured ceiling (remote share)")
    panel(next(a), runs, "prefill 4096: combine, % of the ceiling (target ≥ 90%)", [
        ("ep BF16", field(4096, "bf16", "combine_vs_ceiling", 100), "o-"),
        ("ep FP8 dispatch's rows", field(4096, "fp8", "combine_vs_ceiling", 100), "s-"),
    ], target=90, ylabel="% of the measured ceiling (remote share)",
        extra=lambda ax: ax.axhline(25, color="tab:red", linestyle=":", linewidth=1,
                                    label="cap under the contract's sum (2 ranks)"))
    panel(next(a), runs, "NCCL time / ep time, worst scenario (target > 1 everywhere)", [
        ("dispatch, all sizes", worst_ratio("dispatch", 1 << 30), "o-"),
        ("combine, all sizes", worst_ratio("combine", 1 << 30), "s-"),
    ], target=1, target_label="NCCL's time", ylabel="NCCL µs / ep µs")
    panel(next(a), runs, "NCCL time / ep time at ≤ 128 tokens (target ≥ 3)", [
        ("dispatch", worst_ratio("dispatch", 128), "o-"),
        ("combine", worst_ratio("combine", 128), "s-"),
    ], target=3, ylabel="NCCL µs / ep µs")
    for ax in axes[1]:
        ax.set_xlabel("version (docs/perf.md)")
    fig.suptitle(
        f"Issue 7's targets on 2x H200 across versions: {len(runs)} sweeps, each against the NCCL baseline and floors "
        f"of its own run; the latest is v{last_v} ({last_p.name}). Versions with no 2x H200 sweep have no point.",
        fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(out, dpi=110)
    print(f"{out}: versions {', '.join(f'v{v}' for v in runs)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else RESULTS / "progress-h200-x2.png")
