"""plot_transparent.py OUT: OUT/transparent.png from OUT/transparent.json
(scripts/bench-transparent.sh): per size, the time the program is stopped, the version's size
on disk, and the restart's time cold and warm, for each way at each dirty percentage (medians
over the repetitions, the bars from min to max). Ways that were not available are named in the
legend; a way that failed at a size says "failed" where its bar would be."""
import json, os, statistics, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = sys.argv[1]
d = json.load(open(os.path.join(out, "transparent.json")))
mibs, pcts = d["mibs"], d["percents"]
ways = [("ickpt-run", "sync"), ("ickpt-run", "async"), ("criu", "-"), ("api", "sync"),
        ("api", "async")]
colors = {"ickpt-run sync": "C0", "ickpt-run async": "C9", "criu": "C3", "api sync": "C2",
          "api async": "C8"}


def name(w, m):
    return w if m == "-" else f"{w} {m}"


def cell(mib, pct, w, m):
    for s in d["summary"]:
        if (s["mib"], s["percent"], s["way"], s["mode"]) == (mib, pct, w, m):
            return s
    return None


panels = [("stop_ms", 1, "ms the program is stopped\n(CRIU: frozen_time)", True),
          ("file_bytes", 1e-6, "version / image MB on disk", True),
          ("restart_cold_ms", 1, "restart ms, cold cache", True),
          ("restart_warm_ms", 1, "restart ms, warm cache", True)]
fig, axes = plt.subplots(len(panels), len(mibs), figsize=(6.5 * len(mibs), 3.2 * len(panels)),
                         squeeze=False)
avail = [(w, m) for w, m in ways
         if any(s["status"] == "ok" for s in d["summary"] if (s["way"], s["mode"]) == (w, m))]
missing = [name(w, m) for w, m in ways if (w, m) not in avail]
width = 0.8 / max(1, len(avail))
for col, mib in enumerate(mibs):
    for row, (key, scale, label, log) in enumerate(panels):
        ax = axes[row][col]
        for i, (w, m) in enumerate(avail):
            xs, ys, lo, hi = [], [], [], []
            for j, pct in enumerate(pcts):
                s = cell(mib, pct, w, m)
                if s and s["status"] == "failed":
                    ax.text(j + (i - (len(avail) - 1) / 2) * width, 0.03, "failed", rotation=90,
                            ha="center", va="bottom", fontsize=7, color=colors[name(w, m)],
                            transform=ax.get_xaxis_transform())
                if not s or s["status"] != "ok":
                    continue
                v = [x * scale for x in s.get(key) or [] if x is not None]
                if not v:
                    continue
                med = statistics.median(v)
                xs.append(j + (i - (len(avail) - 1) / 2) * width)
                ys.append(med)
                lo.append(med - min(v))
                hi.append(max(v) - med)
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=colors[name(w, m)],
                   label=name(w, m))
        ax.set_xticks(range(len(pcts)), [f"{p}% dirty" for p in pcts])
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(label, fontsize=8)
        if row == 0:
            ax.set_title(f"{mib} MiB program")
        ax.grid(axis="y", alpha=0.3)
h, labels = axes[0][0].get_legend_handles_labels()
if missing:
    labels = labels + [f"not available: {', '.join(missing)}"]
    h = h + [plt.Rectangle((0, 0), 0, 0, fill=False, edgecolor="none")]
fig.legend(h, labels, loc="lower center", ncol=len(labels), fontsize=8)
fig.suptitle(f"Whole-process checkpoints: ickpt run, CRIU {d.get('criu', '')}, the ickpt API "
             f"({d.get('backend', '')}, {str(d.get('git_commit', ''))[:7]})\n"
             f"{d.get('machine', '')}; medians of {d['reps']} paired repetitions, bars min–max",
             fontsize=9)
fig.tight_layout(rect=(0, 0.04, 1, 0.97))
fig.savefig(os.path.join(out, "transparent.png"), dpi=100)
