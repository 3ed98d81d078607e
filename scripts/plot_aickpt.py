#!/usr/bin/python3
"""Plot `ickpt bench aickpt` CSV files as the paper's (000) Figures 2 and 4.

usage: plot_aickpt.py OUT_PREFIX CSV...
  Figure 2 (one PNG per CSV that has fig2 rows): added run time over the unprotected loop,
  WAIT and AVOIDED pages per checkpoint, per access pattern and mode.
  Figure 4 (one PNG per CSV that has fig4 rows): reduction of sync's added time by the two
  async orders as the copy-on-write buffer grows, per pattern.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ["sync", "async-address", "async-adaptive"]
COLORS = {"sync": "#888888", "async-address": "#4c72b0", "async-adaptive": "#dd8452"}


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def setting(r):
    bw = int(r["bandwidth"])
    bws = "device" if bw == 0 else f"{bw / 2**20:.0f} MiB/s"
    return f"work {r['work']}, storage {bws}, fault-around {r['fault_around']}"


def fig2(path, out):
    rs = [r for r in rows(path) if r["figure"] == "fig2"]
    if not rs:
        return None
    patterns = list(dict.fromkeys(r["pattern"] for r in rs))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    panels = [
        ("added_s", "Increase in run time (s)", MODES),
        ("wait_per_ckpt", "Pages that WAITed per checkpoint", MODES[1:]),
        ("avoided_per_ckpt", "Pages AVOIDED per checkpoint", MODES[1:]),
    ]
    for ax, (col, title, modes) in zip(axes, panels):
        width = 0.8 / len(modes)
        for i, m in enumerate(modes):
            vals = []
            for p in patterns:
                hit = [r for r in rs if r["pattern"] == p and r["mode"] == m]
                vals.append(float(hit[0][col]) if hit else 0.0)
            xs = [k + (i - (len(modes) - 1) / 2) * width for k in range(len(patterns))]
            ax.bar(xs, vals, width, label=m, color=COLORS[m])
        ax.set_xticks(range(len(patterns)), patterns)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"ickpt bench aickpt, 256 MiB, 39 iterations, checkpoint every 10 ({setting(rs[0])})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def fig4(path, out):
    all_rows = rows(path)
    rs = [r for r in all_rows if r["figure"] == "fig4"]
    if not rs:
        return None
    patterns = list(dict.fromkeys(r["pattern"] for r in rs))
    fig, axes = plt.subplots(1, len(patterns), figsize=(5.5 * len(patterns), 4), squeeze=False)
    for ax, p in zip(axes[0], patterns):
        sync = [r for r in all_rows if r["figure"] == "fig2" and r["pattern"] == p and r["mode"] == "sync"]
        sync_added = float(sync[0]["added_s"])
        for m in MODES[1:]:
            pts = sorted(
                (int(r["cow_mib"]), 100.0 * (1.0 - float(r["added_s"]) / sync_added))
                for r in rs
                if r["pattern"] == p and r["mode"] == m
            )
            ax.plot([str(c) for c, _ in pts], [v for _, v in pts], marker="o", label=m, color=COLORS[m])
        ax.set_title(f"{p}: reduction of sync's added run time", fontsize=10)
        ax.set_xlabel("copy-on-write buffer (MiB)")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"ickpt bench aickpt, copy-on-write buffer swept ({setting(rs[0])})", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    prefix = sys.argv[1]
    for path in sys.argv[2:]:
        stem = os.path.splitext(os.path.basename(path))[0]
        for make, suffix in ((fig2, "fig2"), (fig4, "fig4")):
            out = make(path, f"{prefix}{stem}-{suffix}.png")
            if out:
                print(f"wrote {out}")


if __name__ == "__main__":
    main()
