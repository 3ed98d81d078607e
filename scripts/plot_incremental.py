#!/usr/bin/python3
"""Plot `ickpt bench incremental` (docs/benchmarks/incremental.json): checkpoint and restore
against plain file I/O of the same bytes, side by side.

usage: plot_incremental.py INCREMENTAL_JSON OUT_PNG
  Left: per dirty share, the sync checkpoint over a write+fsync of the same bytes (and over
  the same write with early writeback), the async call and the async call + wait over the
  write+fsync. Right: restore over a plain read, and full+9 increments over one full, with a
  warm and a cold page cache. Bars are the median ratio of the interleaved pairs, whiskers
  their minimum and maximum, dots each pair; ratio = ickpt time / baseline time (log scale;
  below 1: faster than the baseline). Dashed: the targets set for the commit and restore path
  (docs/benchmarks.md, "The side-by-side").
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

CHECKPOINT = [
    ("sync_checkpoint", "sync / write+fsync", "#4c72b0"),
    ("sync_checkpoint_vs_writeback", "sync / write+fsync with writeback", "#8fa8d6"),
    ("async_call", "async call / write+fsync", "#55a868"),
    ("async_call_and_wait", "async call + wait / write+fsync", "#a5d6a7"),
]
RESTORE = [
    ("restore_warm", "restore / read\nwarm"),
    ("restore_cold", "restore / read\ncold"),
    ("chain_restore_warm", "full+9 / full\nwarm"),
    ("chain_restore_cold", "full+9 / full\ncold"),
]


def bar(ax, x, c, width, color, label=None):
    med = c["median_ratio"]
    ax.bar(x, med, width, color=color, label=label,
           yerr=[[med - c["min_ratio"]], [c["max_ratio"] - med]], capsize=2, ecolor="#444")
    ax.scatter([x] * len(c["reps"]), [r["ratio"] for r in c["reps"]], s=6, color="black", zorder=3)
    ax.text(x, c["max_ratio"] * 1.06, f"{med:.2f}", ha="center", va="bottom", fontsize=6.5)


def main():
    report = json.load(open(sys.argv[1]))
    comps = report["comparisons"]
    by = {(c["name"], c["dirty_percent"]): c for c in comps}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 1.4]})

    dirty = sorted({c["dirty_percent"] for c in comps if c["dirty_percent"] is not None})
    width = 0.8 / len(CHECKPOINT)
    for i, (name, label, color) in enumerate(CHECKPOINT):
        for k, p in enumerate(dirty):
            c = by.get((name, p))
            if c:
                bar(left, k + (i - len(CHECKPOINT) / 2 + 0.5) * width, c, width, color,
                    label if k == 0 else None)
    for k, p in enumerate(dirty):
        # The target for the sync checkpoint: <= 2x at 1%, <= 1.1x from 10% up.
        t = 2.0 if p == 1 else 1.1
        left.hlines(t, k - 0.45, k + 0.45, colors="#c44e52", linestyles="dashed", linewidth=1)
    left.axhline(1.0, color="grey", linewidth=0.8)
    left.set_yscale("log")
    left.set_xticks(range(len(dirty)))
    left.set_xticklabels([f"{p}% dirty" for p in dirty])
    left.set_ylabel("ickpt / baseline (log; below 1: faster)")
    left.set_title("checkpoint against a write+fsync of the same bytes", fontsize=9)
    left.legend(fontsize=7, loc="lower left")

    for k, (name, label) in enumerate(RESTORE):
        c = by.get((name, None))
        if c:
            bar(right, k, c, 0.6, "#dd8452" if "cold" in name else "#f0b27a")
    # Targets: restore >= 0.9 of a plain read's speed (time ratio <= 1/0.9); full+9 <= 1.1x.
    right.hlines(1 / 0.9, -0.4, 1.4, colors="#c44e52", linestyles="dashed", linewidth=1)
    right.hlines(1.1, 1.6, 3.4, colors="#c44e52", linestyles="dashed", linewidth=1)
    right.axhline(1.0, color="grey", linewidth=0.8)
    tops = [c["max_ratio"] for name, _ in RESTORE for c in [by.get((name, None))] if c]
    right.set_ylim(0, max(tops + [1.2]) * 1.15)
    right.set_xticks(range(len(RESTORE)))
    right.set_xticklabels([lab for _, lab in RESTORE], fontsize=8)
    right.set_title("restore", fontsize=9)

    fig.suptitle(
        f"ickpt bench incremental: {report['size_mib']} MiB of random bytes, backend {report['backend']}, "
        f"{report['reps']} interleaved pairs, commit {report['git_commit'][:12]}\n{report['machine']}",
        fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
