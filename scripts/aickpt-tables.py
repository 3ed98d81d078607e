#!/usr/bin/env python3
"""Markdown tables for docs/benchmarks.md from `ickpt bench aickpt --json` files.

    scripts/aickpt-tables.py docs/benchmarks/aickpt-{raw,raw-around16,paced}.json

Figure 2: added time per setting and pattern for sync, async + address order and async +
adaptive order, with the reductions the paper reports (1 - async / sync; adaptive vs
address). Figure 4: the copy-on-write sweep. With two files of the same setting
(`--pair A.json B.json`), one row per pattern and mode with A's and B's added time and B/A.
"""
import json
import sys
from pathlib import Path


def rows(path):
    d = json.loads(Path(path).read_text())
    return d, d["runs"]


def pick(runs, figure, pattern, mode, cow=None):
    for r in runs:
        if r["figure"] == figure and r["pattern"] == pattern and r["mode"] == mode:
            if cow is None or r["cow_mib"] == cow:
                return r
    return None


def pct(a, b):
    """a against b as a signed percentage; n/a when b is not positive (a noise-dominated
    added time, against which a ratio means nothing)."""
    if b <= 0:
        return "n/a"
    return f"{(a / b - 1) * 100:+.0f}%".replace("-", "−")


def fig2(name, runs):
    out = []
    for p in dict.fromkeys(r["pattern"] for r in runs if r["figure"] == "fig2"):
        s = pick(runs, "fig2", p, "sync")
        ad = pick(runs, "fig2", p, "async-address")
        ap = pick(runs, "fig2", p, "async-adaptive")
        if not (s and ad and ap):
            continue
        counts = lambda r: "{:,.0f} / {:,.0f} / {:,.0f}".format(
            r["wait_per_checkpoint"], r["avoided_per_checkpoint"], r["cow_per_checkpoint"])
        out.append(
            f"| {name} | {p} | {s['added_s']:.2f} s | {ad['added_s']:.2f} s ({pct(ad['added_s'], s['added_s'])}) "
            f"| {ap['added_s']:.2f} s ({pct(ap['added_s'], s['added_s'])}; {pct(ap['added_s'], ad['added_s'])}) "
            f"| {counts(ad)} → {counts(ap)} |")
    return out


def fig4(runs):
    out = []
    sync = {r["pattern"]: r["added_s"] for r in runs if r["figure"] == "fig2" and r["mode"] == "sync"}
    for p in dict.fromkeys(r["pattern"] for r in runs if r["figure"] == "fig4"):
        for cow in sorted({r["cow_mib"] for r in runs if r["figure"] == "fig4" and r["pattern"] == p}):
            ad = pick(runs, "fig4", p, "async-address", cow)
            ap = pick(runs, "fig4", p, "async-adaptive", cow)
            if not (ad and ap and p in sync):
                continue
            red = lambda r: (f"{(1 - r['added_s'] / sync[p]) * 100:.0f}%" if sync[p] > 0
                             else "n/a") + f" ({r['added_s']:.2f} s)"
            out.append(
                f"| {p} | {cow} MiB | {red(ad)} | {red(ap)} | {pct(ap['added_s'], ad['added_s'])} "
                f"| {ad['wait_per_checkpoint']:,.0f} / {ap['wait_per_checkpoint']:,.0f} |")
    return out


def main(args):
    if not args or (args[0] == "--pair" and len(args) != 3):
        sys.exit(__doc__)
    if args[:1] == ["--pair"]:
        (_, a), (_, b) = rows(args[1]), rows(args[2])
        print("| pattern | mode | A added | B added | B / A |\n|---|---|---|---|---|")
        for r in a:
            o = pick(b, r["figure"], r["pattern"], r["mode"], r["cow_mib"])
            if r["figure"] == "fig2" and o:
                # A ratio of added times means nothing unless both sides added time.
                ratio = (f"{o['added_s'] / r['added_s']:.2f}"
                         if r["added_s"] > 0 and o["added_s"] > 0 else "n/a")
                print(f"| {r['pattern']} | {r['mode']} | {r['added_s']:.2f} s | {o['added_s']:.2f} s "
                      f"| {ratio} |")
        return
    print("| setting | pattern | sync: added | async, address: added (vs sync) "
          "| async, adaptive: added (vs sync; vs address) "
          "| WAIT / AVOIDED / COW per checkpoint, address → adaptive |")
    print("|---|---|---|---|---|---|")
    sweeps, sources = [], []
    for path in args:
        d, runs = rows(path)
        name = Path(path).stem.removeprefix("aickpt-")
        print("\n".join(fig2(name, runs)))
        sweeps += fig4(runs)
        sources.append(f"<!-- {name}: backend {sorted({r.get('backend', '?') for r in runs})}, "
                       f"commit {d.get('git_commit', '?')}, {d['machine']} -->")
    # After the table: a comment line inside it would end it.
    print("\n".join(sources))
    if sweeps:
        print("\n| pattern | cow | async, address | async, adaptive | adaptive vs address "
              "| WAIT per checkpoint, address / adaptive |\n|---|---|---|---|---|---|")
        print("\n".join(sweeps))


if __name__ == "__main__":
    main(sys.argv[1:])
