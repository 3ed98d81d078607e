#!/usr/bin/env python3
"""plot_prwip.py OUT: the figures, CSV and table of `make bench-prwip` from OUT/prwip.jsonl.

Every ratio is paired: a run's time over the time of the run without ickpt in the same
round (same backend, workload and steps), so drift between rounds cancels; the median over
rounds is shown, with the smallest and largest as the error bar. Writes OUT/prwip.csv,
OUT/prwip-<backend>.png (Figs. 5-6, 8-9: normalised run time, both intervals),
OUT/prwip-conflicts.png (Fig. 10), OUT/prwip-overhead.png (Fig. 11), OUT/prwip-async.png
(pre-copy with async commits) and OUT/prwip-table.md.
"""
import csv
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

STRATEGIES = ["off", "blind", "prwip", "prwip-opt"]
LABEL = {"off": "traditional", "blind": "pre-copy (blind)", "prwip": "PRWIP", "prwip-opt": "PRWIP-opt",
         "prwip-opt/region": "PRWIP-opt, region as context"}


def load(out):
    runs = [json.loads(l) for l in (out / "prwip.jsonl").read_text().splitlines() if l.strip()]
    plain = {(r["backend"], r["run"]["workload"], r["rep"]): r["run"]["run_s"]
             for r in runs if r["config"] == "plain"}
    rows = []
    for r in runs:
        if r["config"] == "plain":
            continue
        s, interval, mode, discard, *context = r["config"].split(":")
        if context == ["region"]:
            # The region as the context where the backend gave the function (mprotect).
            s += "/region"
        base = plain.get((r["backend"], r["run"]["workload"], r["rep"]))
        x = r["run"]
        rows.append({
            "backend": r["backend"], "workload": x["workload"], "strategy": s,
            "interval": float(interval), "mode": mode, "discard": discard == "1",
            "rep": r["rep"], "steps": x["steps_run"], "run_s": x["run_s"],
            "plain_s": base, "ratio": x["run_s"] / base if base else float("nan"),
            "checkpoints": x["checkpoints"], "ckpt_s": x["ckpt_s"],
            "bytes_written": x.get("bytes_written", 0),
            "precopy_pages": x.get("precopy_pages", 0),
            "precopy_conflicts": x.get("precopy_conflicts", 0),
            "precopy_copies": x.get("precopy_copies", 0),
            "precopy_rewritten_bytes": x.get("precopy_rewritten_bytes", 0),
            "faults": x.get("faults", 0),
        })
    return rows


def group(rows, **want):
    g = defaultdict(list)
    for r in rows:
        if all(r[k] == v for k, v in want.items()):
            g[(r["backend"], r["workload"], r["strategy"], r["interval"])].append(r)
    return g


def median_span(values):
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(v), min(v), max(v)


def conflict_rate(rs):
    pages = sum(r["precopy_pages"] for r in rs)
    return sum(r["precopy_conflicts"] for r in rs) / pages if pages else float("nan")


def paired_speedup(rows, backend, workload, interval, base, other):
    """Median over rounds of T(base)/T(other) - 1, runs of the same round paired. base and
    other are strategies of sync runs, or (strategy, mode) pairs."""
    by = {}
    for r in rows:
        if (r["backend"], r["workload"], r["interval"], r["discard"]) == (backend, workload, interval, False):
            by[((r["strategy"], r["mode"]), r["rep"])] = r["run_s"]
    key = lambda x: x if isinstance(x, tuple) else (x, "sync")
    base, other = key(base), key(other)
    v = [by[(base, k)] / by[(other, k)] - 1 for (s, k) in by if s == other and (base, k) in by]
    return statistics.median(v) if v else float("nan")


def main():
    out = Path(sys.argv[1])
    rows = load(out)
    fields = list(rows[0].keys())
    with open(out / "prwip.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    backends = sorted({r["backend"] for r in rows}, key=lambda b: b != "uffd-async")
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    intervals = sorted({r["interval"] for r in rows})
    sync = group(rows, mode="sync", discard=False)
    discard = group(rows, mode="sync", discard=True)
    asyn = group(rows, mode="async", discard=False)
    # The pre-copy strategy run with async commits (prwip before fca5165, prwip-opt since).
    async_precopy = next((r["strategy"] for r in rows if r["mode"] == "async" and r["strategy"] != "off"), "prwip-opt")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def bars(ax, g, backend, interval, title, strategies=STRATEGIES):
        width = 0.8 / len(strategies)
        for k, s in enumerate(strategies):
            meds, lo, hi = [], [], []
            for w in workloads:
                m, a, b = median_span([r["ratio"] for r in g.get((backend, w, s, interval), [])])
                meds.append(m)
                lo.append(m - a)
                hi.append(b - m)
            xs = [i + (k - (len(strategies) - 1) / 2) * width for i in range(len(workloads))]
            ax.bar(xs, meds, width, yerr=[lo, hi], capsize=2, label=LABEL.get(s, s))
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_ylabel("run time / without ickpt")
        ax.set_title(title)

    # The intervals each backend was measured at (a reduced run may leave some out).
    measured = {b: sorted({r["interval"] for r in rows if r["backend"] == b}) for b in backends}
    for b in backends:
        fig, axes = plt.subplots(1, len(measured[b]), figsize=(6 * len(measured[b]), 4), squeeze=False)
        for ax, i in zip(axes[0], measured[b]):
            bars(ax, sync, b, i, f"{b}, checkpoint every {i:g} s")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / f"prwip-{b}.png", dpi=110)
        plt.close(fig)

    first = intervals[0]
    fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4), squeeze=False)
    for ax, b in zip(axes[0], backends):
        width = 0.25
        for k, s in enumerate(["blind", "prwip", "prwip-opt"]):
            rates = [conflict_rate(sync.get((b, w, s, first), [])) for w in workloads]
            xs = [i + (k - 1) * width for i in range(len(workloads))]
            ax.bar(xs, rates, width, label=LABEL[s])
        ax.set_xticks(range(len(workloads)))
        ax.set_xticklabels(workloads)
        ax.set_ylabel("conflicts / pages pre-copied")
        ax.set_title(f"{b}, checkpoint every {first:g} s")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "prwip-conflicts.png", dpi=110)
    plt.close(fig)

    if discard:  # left out with BENCH_PRWIP_EXTRAS=0
        fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4), squeeze=False)
        for ax, b in zip(axes[0], backends):
            bars(ax, discard, b, first, f"{b}, nothing written, every {first:g} s")
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "prwip-overhead.png", dpi=110)
        plt.close(fig)

    if asyn:  # left out with BENCH_PRWIP_EXTRAS=0: does pre-copy add anything to async?
        both = {}
        for (b, w, st, i), rs in sync.items():
            if st in ("off", async_precopy):
                both[(b, w, "sync " + LABEL[st], i)] = rs
        for (b, w, st, i), rs in asyn.items():
            both[(b, w, "async " + LABEL[st], i)] = rs
        names = ["sync traditional", "async traditional", f"sync {LABEL[async_precopy]}", f"async {LABEL[async_precopy]}"]
        fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4), squeeze=False)
        for ax, b in zip(axes[0], backends):
            bars(ax, both, b, first, f"{b}, sync and async commits, every {first:g} s", names)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "prwip-async.png", dpi=110)
        plt.close(fig)

    lines = []
    fmt = lambda g, key: "%.3f (%.3f-%.3f)" % median_span([r["ratio"] for r in g.get(key, [])])
    for b in backends:
        lines.append(f"\n**{b}**: run time / run without ickpt, median of {max(r['rep'] for r in rows)} paired rounds (min-max)\n")
        extras = bool(discard or asyn)  # left out with BENCH_PRWIP_EXTRAS=0
        # The sync strategies this backend ran (BENCH_PRWIP_STRATEGIES may leave some out).
        ran = [s for s in STRATEGIES if any(k[0] == b and k[2] == s for k in sync)]
        pre = [s for s in ran if s != "off"]
        short = {"off": "trad.", "blind": "blind", "prwip": "PRWIP", "prwip-opt": "opt"}
        heads = ["workload", "interval"] + [LABEL[s] for s in ran]
        if pre:
            heads.append(f"conflicts {' / '.join(short[s] for s in pre)}")
        if ran:
            heads.append(f"s in the calls: {' / '.join(short[s] for s in ran)}")
        if extras:
            heads += ["nothing written: trad. / blind / PRWIP / opt", "conflicts, nothing written: blind / PRWIP / opt",
                      f"async: trad. / {LABEL[async_precopy]}"]
        lines.append("| " + " | ".join(heads) + " |")
        lines.append("|---" * len(heads) + "|")
        rate = lambda g, key: "%.0f%%" % (100 * conflict_rate(g.get(key, [])))
        for w in workloads:
            for i in measured[b]:
                if not any(g.get((b, w, s, i)) for g in (sync, discard, asyn) for s in STRATEGIES):
                    continue  # not run on this backend
                cells = [w, f"{i:g} s"] + [fmt(sync, (b, w, s, i)) for s in ran]
                if pre:
                    cells.append(" / ".join(rate(sync, (b, w, s, i)) for s in pre))
                if ran:
                    cells.append(" / ".join("%.2f" % median_span([r["ckpt_s"] for r in sync.get((b, w, s, i), [])])[0]
                                            for s in ran))
                if extras:
                    ratio = lambda g, s: median_span([r["ratio"] for r in g.get((b, w, s, i), [])])[0]
                    extra = ["", "", ""]
                    if i == first:
                        extra[0] = " / ".join("%.3f" % ratio(discard, s) for s in STRATEGIES)
                        extra[1] = " / ".join(rate(discard, (b, w, s, i)) for s in ["blind", "prwip", "prwip-opt"])
                        extra[2] = " / ".join("%.3f" % ratio(asyn, s) for s in ["off", async_precopy])
                    cells += extra
                lines.append("| " + " | ".join(cells) + " |")
        region = [w for w in workloads if sync.get((b, w, "prwip-opt/region", first))]
        if region:
            lines.append(f"\nPRWIP-opt every {first:g} s with the region as the context (`ICKPT_PRECOPY_CONTEXT=region`) beside the writing function (the default):\n")
            lines.append("| workload | PRWIP-opt, function | PRWIP-opt, region | conflicts function / region | pages pre-copied function / region |")
            lines.append("|---|---|---|---|---|")
            for w in region:
                f, g = sync.get((b, w, "prwip-opt", first), []), sync.get((b, w, "prwip-opt/region", first), [])
                pages = lambda rs: "%.0f" % statistics.mean([r["precopy_pages"] for r in rs]) if rs else "-"
                lines.append(f"| {w} | {fmt(sync, (b, w, 'prwip-opt', first))} | {fmt(sync, (b, w, 'prwip-opt/region', first))} | "
                             f"{100 * conflict_rate(f):.0f}% / {100 * conflict_rate(g):.0f}% | {pages(f)} / {pages(g)} |")
        # (other, base) pairs: sync strategies, or (strategy, mode) for the async runs.
        name = lambda x: f"{x[1]} {LABEL[x[0]]}" if isinstance(x, tuple) else LABEL[x]
        pairs = [("prwip-opt", "off"), ("prwip-opt", "blind"), ("prwip", "off"), ("prwip", "blind"), ("blind", "off"),
                 ("prwip-opt", "prwip-opt/region"), (("off", "async"), ("off", "sync")),
                 ((async_precopy, "async"), ("off", "async")), ((async_precopy, "async"), (async_precopy, "sync"))]
        for i in measured[b]:
            # Pre-copy only moves work out of the calls: the traditional run's share of its
            # time inside them bounds what any strategy can gain over it.
            share = [median_span([r["ckpt_s"] / r["run_s"] for r in sync.get((b, w, "off", i), [])])[0]
                     for w in workloads]
            share = [x for x in share if not math.isnan(x)]
            if share:
                lines.append(f"- {b}, every {i:g} s: traditional spent {100 * statistics.mean(share):.1f}% of its run "
                             f"in the checkpoint calls, the most pre-copy could save (per workload "
                             f"{', '.join('%.1f%%' % (100 * x) for x in share)})")
            for other, base in pairs:
                v = [paired_speedup(rows, b, w, i, base, other) for w in workloads]
                v = [x for x in v if not math.isnan(x)]
                if v:
                    lines.append(f"- {b}, every {i:g} s: {name(other)} over {name(base)}: mean speed-up "
                                 f"{100 * statistics.mean(v):+.1f}% (per workload {', '.join('%+.0f%%' % (100 * x) for x in v)})")
    (out / "prwip-table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
