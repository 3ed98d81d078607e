#!/usr/bin/env python3
"""bench-compare-summary.py OUT N: the tables of docs/benchmarks.md from bench-compare.sh's
OUT/old-1..N.json and OUT/new-1..N.json: each case's median per build, the new/old ratio of
each interleaved pair and its median; then each run over its own plain-write baseline."""
import json
import statistics as st
import sys

out, n = sys.argv[1], int(sys.argv[2])


def load(which, i):
    with open(f"{out}/{which}-{i}.json") as f:
        return json.load(f)


runs = {w: [load(w, i) for i in range(1, n + 1)] for w in ("old", "new")}
DIRTY = [1, 10, 50, 100]


def row(name, f, fmt="{:.1f}"):
    old = [f(j) for j in runs["old"]]
    new = [f(j) for j in runs["new"]]
    r = [b / a for a, b in zip(old, new)]
    print(f"| {name} | {fmt.format(st.median(old))} | {fmt.format(st.median(new))} | "
          f"{' '.join(f'{x:.2f}' for x in r)} | {st.median(r):.2f} |")


print("| what | before | after | after/before, per pair | median |\n|---|---|---|---|---|")
for k, p in enumerate(DIRTY):
    row(f"checkpoint, {p}% dirty, ms", lambda j, k=k: j["cases"][k]["checkpoint_ms"])
    row(f"plain write, {p}% bytes, ms", lambda j, k=k: j["cases"][k]["plain_write_ms"])
row("full checkpoint, ms", lambda j: j["full_checkpoint"]["ms"])
row("restart, full + 9 increments, ms", lambda j: j["restart"]["chain_ms"])
row("restart, one full, ms", lambda j: j["restart"]["full_ms"])
row("version bytes, 1%", lambda j: j["cases"][0]["checkpoint_bytes"], "{:.0f}")
row("version bytes, full", lambda j: j["full_checkpoint"]["bytes"], "{:.0f}")
print("\n| each run over its own baseline | before | after | after/before, per pair | median |"
      "\n|---|---|---|---|---|")
for k, p in enumerate(DIRTY):
    row(f"checkpoint / plain write, {p}% dirty",
        lambda j, k=k: j["cases"][k]["checkpoint_ms"] / j["cases"][k]["plain_write_ms"], "{:.2f}")
row("restart full+9 / restart one full",
    lambda j: j["restart"]["chain_ms"] / j["restart"]["full_ms"], "{:.2f}")
