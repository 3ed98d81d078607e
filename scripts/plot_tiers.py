#!/usr/bin/env python3
"""plot_tiers.py DIR: DIR/tiers.png, and DIR/drain.csv and DIR/restart-tiers.csv, from the
JSON make bench-tiers writes (tiers.json, drain.json, restart-tiers.json, policy.json).
Panels: heat's run time with a drain beside it against none; ickpt's drain against a plain
copy and a plain upload; the newest version restored from each tier; the cost policy against
the fixed 1:9 (checkpoint time, bytes, restore)."""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

d = sys.argv[1]
load = lambda name: json.load(open(os.path.join(d, name)))  # noqa: E731
tiers, drain, restart, policy = (load(f"{n}.json") for n in ("tiers", "drain", "restart-tiers", "policy"))

with open(os.path.join(d, "drain.csv"), "w") as f:
    f.write("case,median_ms,mb_s,over_plain,pairs_low,pairs_high\n")
    for c in drain["cases"]:
        f.write(f"{c['case']},{c['median_ms']:.1f},{c['mb_s']:.1f},{c['over_plain']:.4f},{c['range'][0]:.4f},{c['range'][1]:.4f}\n")
with open(os.path.join(d, "restart-tiers.csv"), "w") as f:
    f.write("from,restore_ms,over_plain_read,pairs_low,pairs_high\n")
    for r in restart["restores"]:
        f.write(f"{r['from']},{r['restore_ms']:.1f},{r['over_plain_read']:.4f},{r['range'][0]:.4f},{r['range'][1]:.4f}\n")
    f.write(f"plain read,{restart['plain_read_ms']:.1f},1,1,1\n")

fig, ax = plt.subplots(1, 4, figsize=(16, 4.2))
a = ax[0]
for i, mode in enumerate(("sync", "async")):
    rs = [p["ratio"] for p in tiers["pairs"] if p["mode"] == mode]
    a.bar(i, statistics.median(rs), color="C0")
    a.plot([i] * len(rs), rs, "k.", ms=4)
a.axhline(1, color="k", lw=0.8)
a.set_xticks([0, 1], ["sync", "async"])
a.set_ylabel("heat run time, with ÷ without drain")
a.set_title("draining beside heat (pairs)")

a = ax[1]
names = [c["case"] for c in drain["cases"]]
a.bar(range(len(names)), [c["mb_s"] for c in drain["cases"]], color=["C1", "C7", "C1", "C7"][: len(names)])
a.set_xticks(range(len(names)), [n.replace(" to ", "\nto ").replace("plain ", "plain\n") for n in names], fontsize=8)
a.set_ylabel("MB/s")
a.set_title(f"drain against plain ({drain['bytes'] >> 20} MiB, 10 files)")

a = ax[2]
rows = restart["restores"]
a.bar(range(len(rows)), [r["restore_ms"] for r in rows], color="C2")
a.axhline(restart["plain_read_ms"], color="k", lw=0.8, ls="--", label="plain read of the full version")
a.set_xticks(range(len(rows)), [r["from"] for r in rows])
a.set_ylabel("restore of the newest version, ms (median)")
a.set_title("restart from each tier (128 MiB, 10 versions)")
a.legend(fontsize=8)

a = ax[3]
labels = ["checkpoint s", "GiB written", "restore ms\n(sum of 3)"]
fx = [policy["fixed"]["checkpoint_s"], policy["fixed"]["bytes"] / 2**30, sum(policy["fixed"]["restore_ms"])]
co = [policy["cost"]["checkpoint_s"], policy["cost"]["bytes"] / 2**30, sum(policy["cost"]["restore_ms"])]
a.bar([x - 0.2 for x in range(3)], [c / f for c, f in zip(co, fx)], width=0.4, color="C3", label="cost ÷ fixed 1:9")
a.axhline(1, color="k", lw=0.8)
a.set_xticks(range(3), labels)
a.set_title("cost policy (ρ = 1) against fixed 1:9")
a.legend(fontsize=8)
fig.suptitle(f"ickpt tiers: drain {drain['git_commit'][:7]}, restart {restart['git_commit'][:7]}, "
             f"policy {policy['git_commit'][:7]}, heat {tiers['git_commit'][:7]}; {drain['machine']}", fontsize=9)
fig.tight_layout()
fig.savefig(os.path.join(d, "tiers.png"), dpi=100)
