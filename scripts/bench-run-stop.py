#!/usr/bin/env python3
"""Paired, interleaved comparison of `ickpt run --mode async`'s stop under two builds of
libickpt_run.so (ICKPT_RUN_LIBRARY), on the workload of `make bench-transparent`
(examples/transparent/dirty.c, built by the caller).

Usage: bench-run-stop.py ICKPT DIRTY WORK MIB PERCENT CHECKPOINTS REPS LIB_A LIB_B [--restart]

Per repetition, A then B (B then A on odd ones): start DIRTY under `ickpt run`, take the
full version, then CHECKPOINTS times: rewrite PERCENT% of the pages, checkpoint
(`ickpt checkpoint --wait`). With --restart, each checkpoint is followed by SIGKILL and
`ickpt restart`, so every one measured is the first after a restart, as the benchmark takes
them. The first increment (after the full version) is left out, and so are full versions the
restart bound makes. Prints each run's medians of stop, park and capture (ICKPT_RUN_STATS)
and the version's bytes, then the medians over runs and the paired ratios B/A of the stop.
Each library must be named libickpt_run.so (`ickpt checkpoint` looks for it by name).
"""
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bt", os.path.join(HERE, "bench-transparent.py"))
bt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bt)

KEYS = ["stop_ms", "park_ms", "capture_ms", "bytes"]


def main():
    args = [a for a in sys.argv[1:] if a != "--restart"]
    restart = "--restart" in sys.argv[1:]
    if len(args) != 9:
        sys.exit(__doc__)
    ickpt, dirty, work, mib, pct, n, reps, lib_a, lib_b = args
    mib, pct, n, reps = int(mib), int(pct), int(n), int(reps)
    store, marker = os.path.join(work, "store"), os.path.join(work, "marker")
    stats = os.path.join(work, "stats.jsonl")

    def pid_of():
        return int(open(os.path.join(store, "ickpt-run.pid")).read().split()[0])

    def checkpoint():
        out = subprocess.run([ickpt, "checkpoint", "--dir", store, "--wait", "--json"],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])["version"]

    def stats_of(v):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = [json.loads(x) for x in open(stats) if x.strip()]
            got = [r for r in rows if r["version"] == v]
            if got:
                return got[-1]
            time.sleep(0.002)
        sys.exit(f"no ICKPT_RUN_STATS line for version {v}")

    def one(lib):
        subprocess.run(["rm", "-rf", store, stats, marker], check=True)
        env = dict(os.environ, ICKPT_RUN_STATS=stats, ICKPT_RUN_LIBRARY=lib)
        err = open(os.path.join(work, "run.err"), "w")
        p = subprocess.Popen([ickpt, "run", "--dir", store, "--mode", "async", "--", dirty,
                              str(mib), marker], env=env, stderr=err, start_new_session=True)
        seq = bt.wait_marker(marker, lambda r: r["event"] == "ready", 300, [p], "start")["seq"]
        checkpoint()
        rows = []
        for i in range(n + 1):
            bt.request_step(pid_of(), pct)
            seq = bt.wait_marker(marker, lambda r: r["event"] == "step" and r["seq"] > seq,
                                 300, [p], "a step")["seq"]
            row = stats_of(checkpoint())
            if i > 0 and row["kind"] == "incremental":
                rows.append(row)
            if restart:
                old = pid_of()
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                p = subprocess.Popen([ickpt, "restart", "--dir", store], stderr=err,
                                     start_new_session=True)
                deadline = time.monotonic() + 300
                while True:
                    try:
                        if pid_of() != old:
                            break
                    except (OSError, ValueError, IndexError):
                        pass
                    if p.poll() is not None or time.monotonic() > deadline:
                        sys.exit(f"`ickpt restart` named no new process in {store}/ickpt-run.pid "
                                 f"(exit {p.poll()}); see {work}/run.err")
                    time.sleep(0.001)
                # The step waits, pending, until the restarted program runs.
                bt.request_step(pid_of(), 0)
                seq = bt.wait_marker(marker, lambda r: r["event"] == "step" and r["seq"] > seq,
                                     300, [p], "the restarted program")["seq"]
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return {k: statistics.median(r[k] for r in rows) for k in KEYS}

    res = {"A": [], "B": []}
    for rep in range(reps):
        for w in (["A", "B"] if rep % 2 == 0 else ["B", "A"]):
            r = one(lib_a if w == "A" else lib_b)
            res[w].append(r)
            print(rep, w, {k: round(v, 3) for k, v in r.items()}, flush=True)
    for w in "AB":
        print(w, {k: round(statistics.median(r[k] for r in res[w]), 3) for k in KEYS})
    print("paired stop ratios B/A",
          [round(b["stop_ms"] / a["stop_ms"], 3) for a, b in zip(res["A"], res["B"])])


if __name__ == "__main__":
    main()
