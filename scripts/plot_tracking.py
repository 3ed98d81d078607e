#!/usr/bin/python3
"""Plot `ickpt bench tracking` results (docs/benchmarks/tracking.json).

usage: plot_tracking.py TRACKING_JSON OUT_PREFIX
  OUT_PREFIX + tracking-first-write.png: time a first write adds per page, per backend and
      page order, next to the bare kernel mechanism (log scale).
  OUT_PREFIX + tracking-acck.png: ACCK against page granularity per workload: monitoring
      time, pages stored per page written, and total checkpointing cost.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def first_write(report, out):
    rows = report["first_write"]
    labels = []
    for r in rows:
        if r["label"] not in labels:
            labels.append(r["label"])
    fig, ax = plt.subplots(figsize=(11, 4.8))
    width = 0.4
    for i, order in enumerate(["sequential", "random"]):
        vals = []
        for lab in labels:
            v = [r["added_ns_per_page"] for r in rows if r["label"] == lab and r["order"] == order]
            vals.append(max(v[0], 1) / 1000 if v else 0)
        xs = [x + (i - 0.5) * width for x in range(len(labels))]
        bars = ax.bar(xs, vals, width, label=order, color=["#4c72b0", "#dd8452"][i])
        for b, v in zip(bars, vals):
            ax.text(b.get_x() + b.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("added per first write (µs, log)")
    ax.set_title(f"First write to tracked memory, {report['size_mib']} MiB — {report['machine']}", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out + "tracking-first-write.png", dpi=110)


def acck(report, out):
    rows = report["acck"]
    workloads = []
    configs = []
    for r in rows:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
        c = f"{r['backend']} {r['granularity']}"
        if c not in configs:
            configs.append(c)
    metrics = [
        ("monitor_ms", "monitoring time (ms)"),
        ("stored_per_written", "pages stored / pages written"),
        ("total_ms", "monitoring + checkpoints (ms)"),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    width = 0.8 / len(configs)
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2", "#937860"]
    for ax, (key, title) in zip(axes, metrics):
        for i, c in enumerate(configs):
            vals = []
            for w in workloads:
                m = [r for r in rows if r["workload"] == w and f"{r['backend']} {r['granularity']}" == c]
                if not m:
                    vals.append(0)
                elif key == "stored_per_written":
                    vals.append(m[0]["stored_pages"] / max(m[0]["written_pages"], 1))
                else:
                    vals.append(m[0][key])
            xs = [x + (i - len(configs) / 2 + 0.5) * width for x in range(len(workloads))]
            ax.bar(xs, vals, width, label=c, color=colors[i % len(colors)])
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"ACCK (adaptive) against page granularity, {report['size_mib']} MiB", fontsize=10)
    fig.tight_layout()
    fig.savefig(out + "tracking-acck.png", dpi=110)


def main():
    report = json.load(open(sys.argv[1]))
    out = sys.argv[2]
    if report["first_write"]:
        first_write(report, out)
    if report["acck"]:
        acck(report, out)


if __name__ == "__main__":
    main()
