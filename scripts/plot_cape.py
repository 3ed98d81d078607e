"""plot_cape.py OUT: cape.png from OUT/cape.json (scripts/bench-cape.sh): checkpoint sizes
(location 1, location 2 word-level, location 2 page-level), run time against no
checkpoints, and CAPE's parallel-loop speed-up."""
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

out = sys.argv[1]
d = json.load(open(os.path.join(out, "cape.json")))
ns = sorted(d["sizes"], key=int)
s = [d["sizes"][n] for n in ns]
fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
x = range(len(ns))
w = 0.27
ax[0].bar([i - w for i in x], [v["loc1_bytes"] / 1e6 for v in s], w, label="location 1 (whole init)")
ax[0].bar(x, [v["loc2_page_bytes"] / 1e6 for v in s], w, label="location 2, page-level")
ax[0].bar([i + w for i in x], [v["loc2_bytes"] / 1e6 for v in s], w, label="location 2, word-level")
ax[0].set_yscale("log"); ax[0].set_ylabel("MB per checkpoint"); ax[0].set_xticks(list(x), ns)
ax[0].set_xlabel("N"); ax[0].legend(fontsize=8); ax[0].set_title("Checkpoint size")
ax[1].bar([i - w for i in x], [100 * (v["all_ratio"] - 1) for v in s], w, label="all: run time vs none, paired")
ax[1].bar(x, [100 * (v["loc2_ratio"] - 1) for v in s], w, label="loc2: run time vs none, paired")
ax[1].bar([i + w for i in x], [v["loc2_ickpt_pct"] for v in s], w, label="loc2: time in section calls")
ax[1].plot([i - w for i in x], [v["all_ickpt_pct"] for v in s], "k_", ms=14, label="all: time in section calls")
ax[1].axhline(0, color="k", lw=0.8); ax[1].set_xticks(list(x), ns); ax[1].set_xlabel("N")
ax[1].set_ylabel("% of the run without checkpoints"); ax[1].legend(fontsize=7)
ax[1].set_title("Overhead, 100 iterations (medians)")
c = d["cape"]
ranks = sorted(c, key=int)
ax[2].plot([int(r) for r in ranks], [c[r]["speedup"] for r in ranks], "o-", label="measured")
ax[2].plot([1, 2, 4], [1, 2, 4], "k:", label="ideal")
ax[2].set_xlabel("ranks (2 cores)"); ax[2].set_ylabel("loop speed-up over 1 rank")
ax[2].set_title("CAPE parallel loop"); ax[2].legend(fontsize=8)
fig.suptitle(f"The CAPE paper's Table II with ickpt ({d['backend']}, {d['machine']}, {d['git_commit'][:7]})", fontsize=9)
fig.tight_layout()
fig.savefig(os.path.join(out, "cape.png"), dpi=110)
