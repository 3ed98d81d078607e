#!/usr/bin/env python3
"""plot_compress.py DIR: DIR/compress.png from DIR/compress.json and DIR/compress-heat.json
(make bench-tiers). Left: zstd's ratio against its encoding speed per level, on the heat grid
and on random bytes, the encoder a commit uses. Right: heat's checkpoint calls and run time
with ICKPT_COMPRESS=fast as a multiple of off, sync and async, median of the pairs with
their range."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

d = sys.argv[1]
codec = json.load(open(os.path.join(d, "compress.json")))
heat = json.load(open(os.path.join(d, "compress-heat.json")))
fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
for c, marker in zip(codec["corpora"], "os"):
    xs = [l["encode_mb_s"] for l in c["codec"] if l["level"] != "off"]
    ys = [l["ratio"] for l in c["codec"] if l["level"] != "off"]
    a.plot(xs, ys, marker=marker, label=c["corpus"])
    for l in c["codec"]:
        if l["level"] != "off":
            a.annotate(l["level"], (l["encode_mb_s"], l["ratio"]), textcoords="offset points",
                       xytext=(4, 4), fontsize=8)
a.set_xscale("log")
a.set_xlabel("encode MB/s (one core, 256 KiB batches)")
a.set_ylabel("raw / stored bytes")
a.set_title("zstd level: ratio against speed")
a.legend()
labels, meds, los, his = [], [], [], []
for mode in ("sync", "async"):
    m = heat["modes"][mode]
    for what, key in (("checkpoint calls", "ckpt_"), ("run", "")):
        labels.append(f"{mode}\n{what}")
        meds.append(m[f"{key}median_ratio"])
        los.append(m[f"{key}median_ratio"] - m[f"{key}ratio_low"])
        his.append(m[f"{key}ratio_high"] - m[f"{key}median_ratio"])
b.bar(range(len(labels)), meds, yerr=[los, his], capsize=4, color=["C3", "C3", "C2", "C2"])
b.axhline(1.0, color="k", lw=0.8)
b.set_xticks(range(len(labels)), labels)
b.set_ylabel("fast / off (paired)")
b.set_title("demo/heat.c, 64 MiB grid: zstd fast against raw pages")
fig.suptitle(f"ickpt compression at {codec['git_commit'][:10]}, {codec['machine']}", fontsize=9)
fig.tight_layout()
fig.savefig(os.path.join(d, "compress.png"), dpi=110)
