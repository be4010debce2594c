#!/usr/bin/env python3
"""Plot an `ep bench --sweep` JSON file: bandwidth (remote share, DeepEP convention) against
tokens per rank for ep's dispatch and combine, the NCCL baseline and the ceiling measured in the
same run. Writes FILE.png next to FILE.json.

    python3 scripts/plot_bench.py bench/results/<device>-<date>.json
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(path):
    d = json.loads(Path(path).read_text())
    sc = d["scenarios"]
    ceiling = sc[0]["ceiling_gbps"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    for ax, (fmt, routing) in zip(axes.flat, [(f, r) for f in ("bf16", "fp8") for r in ("uniform", "skewed")]):
        rows = sorted((s for s in sc if s["format"] == fmt and s["routing"] == routing), key=lambda s: s["tokens_per_rank"])
        if not rows:
            continue
        x = [s["tokens_per_rank"] for s in rows]
        ax.plot(x, [s["dispatch_gbps_remote"] for s in rows], "o-", color="tab:blue", label="ep dispatch")
        ax.plot(x, [s["combine_gbps_remote"] for s in rows], "s-", color="tab:orange", label="ep combine")
        if rows[0].get("nccl_dispatch_us"):
            remote = lambda s, key: s[key] * s["dispatch_gbps_remote"] / s["dispatch_gbps"]
            ax.plot(x, [remote(s, "bytes_per_rank_dispatch") / s["nccl_dispatch_us"] / 1e3 for s in rows], "o--",
                    color="tab:blue", alpha=0.5, label="NCCL dispatch")
            ax.plot(x, [remote(s, "bytes_per_rank_combine") / s["nccl_combine_us"] / 1e3 for s in rows], "s--",
                    color="tab:orange", alpha=0.5, label="NCCL combine")
        ax.axhline(ceiling, color="black", linestyle=":", label=f"ceiling ({ceiling:.0f} GB/s)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{fmt} dispatch, {routing} routing")
        ax.set_xlabel("tokens per rank")
        ax.set_ylabel("GB/s per rank (remote share)")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"ep bench: {d['device']} ({d['backend']}), {d['ranks']} ranks, hidden {d['hidden']}, top-{d['top_k']}, "
                 f"{d['experts']} experts — commit {d['commit']}, {d['date']}")
    fig.tight_layout()
    out = Path(path).with_suffix(".png")
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1])
