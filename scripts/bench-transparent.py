#!/usr/bin/python3
"""bench-transparent.py: the runs of `make bench-transparent` (scripts/bench-transparent.sh
builds what they need and calls this). Run as root: CRIU needs it, and so does dropping the
page cache for cold restarts.

One workload (examples/transparent/dirty.c: MIB MiB of random bytes, each step rewrites a
chosen percentage of the pages, then waits) checkpointed and restarted five ways:

  ickpt-run sync   `ickpt run --dir D -- dirty`, checkpointed by `ickpt checkpoint --wait`;
                   ICKPT_RUN_STATS gives stop_ms (the program stopped), park_ms, capture_ms,
                   precopy_ms and precopy_pages (async: the copy before the stop),
                   commit_ms, pages and bytes; restarted by `ickpt restart --dir D`
  ickpt-run async  the same with `ickpt run --mode async`, reported "not available" while
                   ickpt run refuses it (its message recorded)
  criu             `criu dump --leave-running` of the same unmodified program (a full image
                   every time: without soft-dirty bits there are no incremental dumps);
                   `criu restore -d`; the freeze is the dump's frozen_time (below)
  api sync/async   dirty_api (the same source with -DDIRTY_API): protects its buffer and
                   calls ickpt_checkpoint(); its stop is the time inside that call; restarted
                   by running it again with `restore` (ickpt_restore_latest)

Per repetition and size, every way runs once, in an order that rotates between repetitions
and sizes (paired, interleaved): start the program, take a first (full) checkpoint (ickpt;
CRIU needs none), then for each percentage: a step, a checkpoint, SIGKILL, a restart with the
page cache dropped (cold), SIGKILL again, a restart with the cache as it is (warm), and go on
with that restarted program. Each checkpoint thus sees exactly one step's pages dirty.

A restart's time runs from just before the restart command is started until the restored
program writes its first marker record (its CLOCK_MONOTONIC time, taken in the program): the
first thing the program does of its own once restored (dirty.c says why).

Writes OUT/transparent.json (header, every row, the summary) and OUT/transparent.csv, and
prints the summary tables (markdown).
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time

SIGUSR1 = signal.SIGUSR1
SYS_rt_tgsigqueueinfo = 297  # x86-64
PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)

WAYS = [("ickpt-run", "sync"), ("ickpt-run", "async"), ("criu", "-"), ("api", "sync"),
        ("api", "async")]


class Failed(Exception):
    """A run of one way that could not go on: its rows say why."""


def log(msg):
    print(f"bench-transparent: {msg}", file=sys.stderr, flush=True)


def now_ns():
    """CLOCK_REALTIME, as the program's records (CRIU restores a process into a time namespace
    whose CLOCK_MONOTONIC goes on from the dump's)."""
    return time.time_ns()


def read_marker(path):
    try:
        with open(path, "rb") as f:
            words = f.read(256).decode().split()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if len(words) != 10:
        return None
    return {"seq": int(words[0]), "pid": int(words[1]), "event": words[2], "t": int(words[3]),
            "a": [int(w) for w in words[4:]]}


def wait_marker(path, pred, timeout, procs=(), what="the marker", tick=None):
    """The first record satisfying pred, polled every millisecond; bounded by timeout. A
    process of procs that exits first fails the wait with its stderr. tick, if given, is
    called at each poll."""
    deadline = time.monotonic() + timeout
    while True:
        r = read_marker(path)
        if r is not None and pred(r):
            return r
        if tick is not None:
            tick()
        for p in procs:
            if p.poll() is not None:
                raise Failed(f"{what}: {' '.join(p.args[:2])} exited with {p.returncode} "
                             f"before it: {tail(p)}")
        if time.monotonic() > deadline:
            raise Failed(f"{what}: not within {timeout} s (last record: {r})")
        time.sleep(0.001)


def tail(p):
    """The last lines of the stderr file a process was started with."""
    path = getattr(p, "stderr_path", None)
    if not path or not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-6:])


def start(args, stderr_path, env=None):
    with open(stderr_path, "w") as err, open(stderr_path + ".out", "w") as out:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                             start_new_session=True)
    p.stderr_path = stderr_path
    return p


def request_step(pid, percent):
    """SIGUSR1 to the main thread with the percentage in si_value (rt_tgsigqueueinfo)."""
    info = (ctypes.c_int * 32)()
    info[0] = SIGUSR1
    info[2] = -1  # SI_QUEUE
    info[4] = os.getpid()
    info[5] = os.getuid()
    info[6] = percent  # si_value.sival_int, at offset 24
    if libc.syscall(SYS_rt_tgsigqueueinfo, pid, pid, SIGUSR1, ctypes.byref(info)) != 0:
        raise Failed(f"rt_tgsigqueueinfo({pid}): {os.strerror(ctypes.get_errno())}")


def kill(pid, proc=None, timeout=60):
    """SIGKILL pid and reap it: through proc when it is our Popen, else with waitpid (a
    restored process this one became the subreaper of)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    if proc is not None:
        proc.wait(timeout=timeout)
        return
    while time.monotonic() < deadline:
        try:
            got, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            if not os.path.exists(f"/proc/{pid}"):
                return
            got = 0
        if got == pid:
            return
        time.sleep(0.005)
    raise Failed(f"process {pid} still there {timeout} s after SIGKILL")


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def sizes_of(paths):
    """(apparent bytes, allocated bytes) of the files."""
    b = d = 0
    for p in paths:
        st = os.stat(p)
        b += st.st_size
        d += st.st_blocks * 512
    return b, d


def files_under(d):
    return [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs]


def run_cmd(args, timeout, what):
    t0 = now_ns()
    try:
        r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{what}: {' '.join(args[:2])} took more than {timeout} s")
    ms = (now_ns() - t0) / 1e6
    if r.returncode != 0:
        raise Failed(f"{what}: {' '.join(args)} exited with {r.returncode}: "
                     f"{' | '.join((r.stderr or r.stdout).strip().splitlines()[-8:])}")
    return r, ms


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.marker = os.path.join(self.work, "marker")
        self.rows = []

    def row(self, **kw):
        base = {k: None for k in CSV_FIELDS}
        base.update(kw)
        self.rows.append(base)
        shown = {k: v for k, v in kw.items() if v is not None and k not in ("rep", "order")}
        log(f"  {shown}")
        return base

    def fresh(self, *names):
        for n in names:
            p = os.path.join(self.work, n)
            if os.path.isdir(p):
                shutil.rmtree(p)
            elif os.path.exists(p):
                os.remove(p)

    def after(self, seq):
        return lambda r: r["seq"] > seq

    # --- restarts -----------------------------------------------------------------------

    def restart(self, start_fn, cold, what, ping=None):
        """Start a restart; its time: until the restored program's first record. With ping
        (a store directory), the program is asked for a 0% step as soon as its restart names
        its process there: `ickpt run`'s library waits again when a checkpoint cuts its
        sigwaitinfo short, so the restored program, unlike CRIU's, does not wake by itself."""
        if cold:
            drop_caches()
        before = read_marker(self.marker)
        pid_file = os.path.join(ping, "ickpt-run.pid") if ping else None
        old = open(pid_file).read() if pid_file and os.path.exists(pid_file) else None
        pinged = []

        def tick():
            if pid_file is None or pinged:
                return
            try:
                text = open(pid_file).read()
            except OSError:
                return
            if text != old and text.split():
                pid = int(text.split()[0])
                request_step(pid, 0)
                pinged.append(pid)

        t0 = now_ns()
        proc = start_fn()
        procs = [proc] if proc is not None and getattr(proc, "watch", True) else []
        r = wait_marker(self.marker, lambda r: r["t"] > t0 and r != before, self.a.timeout,
                        procs, what, tick)
        return (r["t"] - t0) / 1e6, r

    # --- ickpt run ----------------------------------------------------------------------

    def ickpt_run(self, mode, mib, rep, order):
        store = os.path.join(self.work, "store")
        stats = os.path.join(self.work, "stats.jsonl")
        self.fresh("store", "stats.jsonl", "marker")
        env = dict(os.environ, ICKPT_RUN_STATS=stats)
        cmd = [self.a.ickpt, "run", "--dir", store]
        if mode == "async":
            cmd += ["--mode", "async"]
        cmd += ["--", self.a.dirty, str(mib), self.marker]
        common = dict(rep=rep, order=order, mib=mib, way="ickpt-run", mode=mode)
        os.sync()
        p = start(cmd, os.path.join(self.work, f"run-{mode}.err"), env)
        procs = {"cur": p}

        def body():
            try:
                r = wait_marker(self.marker, lambda r: r["event"] == "ready", self.a.timeout,
                                [p], "ickpt run starting the program")
            except Failed:
                if mode == "async" and p.poll() is not None:
                    for pct in self.a.percents:
                        self.row(**common, percent=pct, status="not available", note=tail(p))
                    return
                raise
            seq = r["seq"]

            def checkpoint():
                out, ms = self.ickpt_checkpoint(store, procs["cur"])
                v = json.loads(out.strip().splitlines()[-1])["version"]
                deadline = time.monotonic() + self.a.timeout
                while True:
                    lines = [json.loads(x) for x in open(stats) if x.strip()] \
                        if os.path.exists(stats) else []
                    got = [x for x in lines if x["version"] == v]
                    if got:
                        s = got[-1]
                        break
                    if time.monotonic() > deadline:
                        raise Failed(f"no ICKPT_RUN_STATS line for version {v}")
                    time.sleep(0.002)
                vfile = os.path.join(store, f"v{v:08d}.ickpt")
                fb, db = sizes_of([vfile])
                return dict(version=v, stop_ms=s["stop_ms"], park_ms=s["park_ms"],
                            capture_ms=s["capture_ms"], commit_ms=s["commit_ms"],
                            pages=s["pages"], bytes=s["bytes"], file_bytes=fb, disk_bytes=db,
                            snapshot_bytes=s.get("snapshot_bytes"), kind=s["kind"],
                            precopy_ms=s.get("precopy_ms"), precopy_pages=s.get("precopy_pages"),
                            cmd_ms=round(ms, 3))

            # The library waits again when a checkpoint cuts the program's sigwaitinfo short:
            # no "wake" record; a step asked for meanwhile waits, pending, until it is over.
            c = checkpoint()
            self.row(**common, percent=0, status="ok", **c)
            for pct in self.a.percents:
                request_step(procs["cur"].pid, pct)
                seq = wait_marker(self.marker, lambda r: r["event"] == "step" and
                                  r["seq"] > seq, self.a.timeout, [procs["cur"]],
                                  "a step")["seq"]
                c = checkpoint()
                row = self.row(**common, percent=pct, status="ok", **c)
                seq = self.restarts(row, procs, [self.a.ickpt, "restart", "--dir", store],
                                    None, f"restart-{pct}", "ickpt restart",
                                    ping=store)["seq"]

        self.guarded(common, procs, body)

    def ickpt_checkpoint(self, store, prog):
        """`ickpt checkpoint --wait`, failing at once, with what is known, if the program
        dies meanwhile."""
        t0 = now_ns()
        path = os.path.join(self.work, "checkpoint.out")
        with open(path, "w") as out, open(path + ".err", "w") as err:
            c = subprocess.Popen([self.a.ickpt, "checkpoint", "--dir", store, "--wait",
                                  "--json", "--timeout", f"{self.a.timeout}s"],
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = time.monotonic() + self.a.timeout + 10
        while c.poll() is None:
            if prog.poll() is not None:
                c.kill()
                c.wait(timeout=60)
                st = prog.returncode
                how = f"killed by {signal.Signals(-st).name}" if st < 0 else f"exit {st}"
                files = ", ".join(f"{os.path.basename(f)} {os.stat(f).st_size} B"
                                  for f in sorted(files_under(store)))
                raise Failed(f"the program died during the checkpoint ({how}) "
                             f"{(now_ns() - t0) / 1e9:.1f} s after it was asked for; "
                             f"its stderr: {tail(prog) or '(empty)'}; the store: {files}")
            if time.monotonic() > deadline:
                c.kill()
                c.wait(timeout=60)
                raise Failed("ickpt checkpoint --wait did not end")
            time.sleep(0.002)
        ms = (now_ns() - t0) / 1e6
        text = open(path).read()
        if c.returncode != 0:
            raise Failed(f"ickpt checkpoint exited with {c.returncode}: {text.strip()} "
                         f"{open(path + '.err').read().strip()}")
        return text, ms

    # --- CRIU ---------------------------------------------------------------------------

    def criu(self, mib, rep, order):
        img = os.path.join(self.work, "criu-img")
        self.fresh("criu-img", "marker")
        common = dict(rep=rep, order=order, mib=mib, way="criu", mode="-")
        os.sync()
        p = start([self.a.dirty, str(mib), self.marker], os.path.join(self.work, "criu-prog.err"))
        pid, proc = p.pid, p
        try:
            r = wait_marker(self.marker, lambda r: r["event"] == "ready", self.a.timeout, [p],
                            "the program starting")
            for pct in self.a.percents:
                seq = r["seq"]
                request_step(pid, pct)
                watch = [proc] if proc is not None else []
                r = wait_marker(self.marker, lambda r: r["event"] == "step" and r["seq"] > seq,
                                self.a.timeout, watch, "a step")
                self.fresh("criu-img")
                os.makedirs(img)
                out, ms = run_cmd([self.a.criu, "dump", "-t", str(pid), "-D", img,
                                   "--leave-running", "--display-stats",
                                   "-o", os.path.join(self.work, "criu-dump.log")],
                                  self.a.timeout, "criu dump")
                st = criu_stats(out.stdout)
                r = wait_marker(self.marker, lambda r: r["event"] == "wake" and r["seq"] > seq,
                                self.a.timeout, watch, "the program after criu dump")
                files = files_under(img)
                fb, db = sizes_of(files)
                pages_b, _ = sizes_of([f for f in files if os.path.basename(f).startswith("pages-")])
                row = self.row(**common, percent=pct, status="ok",
                               stop_ms=st["frozen_ms"], freezing_ms=st["freezing_ms"],
                               memdump_ms=st["memdump_ms"], memwrite_ms=st["memwrite_ms"],
                               pages=st["pages_written"], bytes=fb, file_bytes=fb,
                               disk_bytes=db, pages_bytes=pages_b, cmd_ms=round(ms, 3))
                for cold in (True, False):
                    kill(pid, proc)
                    proc = None

                    def go():
                        run_cmd([self.a.criu, "restore", "-D", img, "-d",
                                 "-o", os.path.join(self.work, "criu-restore.log")],
                                self.a.timeout, "criu restore")
                        return None

                    ms, r = self.restart(go, cold, "criu restore")
                    if r["pid"] != pid:
                        raise Failed(f"criu restored pid {r['pid']}, not {pid}")
                    row["restart_cold_ms" if cold else "restart_warm_ms"] = round(ms, 3)
                log(f"  restore cold {row['restart_cold_ms']} ms, warm {row['restart_warm_ms']} ms")
        except Failed as e:
            self.row(**common, status="failed", note=str(e))
            log(f"  FAILED: {e}")
        finally:
            if os.path.exists(f"/proc/{pid}"):
                kill(pid, proc)
            self.fresh("criu-img")

    # --- the explicit API ---------------------------------------------------------------

    def api(self, mode, mib, rep, order):
        store = os.path.join(self.work, "store")
        self.fresh("store", "marker")
        env = dict(os.environ, ICKPT_DIR=store)
        common = dict(rep=rep, order=order, mib=mib, way="api", mode=mode)
        args = [self.a.dirty_api, str(mib), self.marker, mode]
        os.sync()
        p = start(args, os.path.join(self.work, f"api-{mode}.err"), env)
        procs = {"cur": p}

        def committed(seq, what):
            c = wait_marker(self.marker, lambda r: r["event"] == "commit" and r["seq"] > seq,
                            self.a.timeout, [procs["cur"]], what)
            v = c["a"][3]
            fb, db = sizes_of([os.path.join(store, f"v{v:08d}.ickpt")])
            return c["seq"], dict(version=v, stop_ms=c["a"][2] / 1e6, bytes=c["a"][4],
                                  commit_ms=c["a"][5] / 1e6, file_bytes=fb, disk_bytes=db)

        def body():
            seq, c = committed(0, "the program's first checkpoint")
            self.row(**common, percent=0, status="ok", **c)
            for pct in self.a.percents:
                request_step(procs["cur"].pid, pct)
                seq, c = committed(seq, "a step and its checkpoint")
                row = self.row(**common, percent=pct, status="ok", **c)
                seq = self.restarts(row, procs, args + ["restore"], env,
                                    f"api-{mode}-restore-{pct}", "dirty_api restore",
                                    first="resumed")["seq"]

        self.guarded(common, procs, body)

    def restarts(self, row, procs, args, env, err, what, first=None, ping=None):
        """SIGKILL the program, time the restart `args` (which becomes the program) with the
        page cache dropped, then again with it warm, and go on with that one; returns the
        restored program's first record, whose event must be `first` when given."""
        for cold in (True, False):
            kill(procs["cur"].pid, procs["cur"])

            def go():
                procs["cur"] = start(args, os.path.join(
                    self.work, f"{err}-{'cold' if cold else 'warm'}.err"), env)
                return procs["cur"]

            ms, r = self.restart(go, cold, what, ping)
            if first and r["event"] != first:
                raise Failed(f"the restored program's first record is {r}")
            row["restart_cold_ms" if cold else "restart_warm_ms"] = round(ms, 3)
        log(f"  restart cold {row['restart_cold_ms']} ms, warm {row['restart_warm_ms']} ms")
        return r

    def guarded(self, common, procs, body):
        """Run body; a failure becomes a row saying why. The program is ended and the store
        removed either way."""
        try:
            body()
        except Failed as e:
            self.row(**common, status="failed", note=str(e))
            log(f"  FAILED: {e}")
        finally:
            if procs["cur"].poll() is None:
                kill(procs["cur"].pid, procs["cur"])
            self.fresh("store")

    def run(self):
        for rep in range(1, self.a.reps + 1):
            for si, mib in enumerate(self.a.mibs):
                k = (rep - 1 + si) % len(WAYS)
                for order, (way, mode) in enumerate(WAYS[k:] + WAYS[:k]):
                    log(f"rep {rep}/{self.a.reps}, {mib} MiB, {way} {mode} ({order + 1}/{len(WAYS)})")
                    if way == "ickpt-run":
                        self.ickpt_run(mode, mib, rep, order)
                    elif way == "criu":
                        self.criu(mib, rep, order)
                    else:
                        self.api(mode, mib, rep, order)


def criu_stats(text):
    """The dump's statistics as --display-stats prints them (the stats-dump image's
    dump_stats_entry), in ms and pages."""
    want = {"Freezing time": "freezing_ms", "Frozen time": "frozen_ms",
            "Memory dump time": "memdump_ms", "Memory write time": "memwrite_ms",
            "Memory pages scanned": "pages_scanned", "Memory pages written": "pages_written"}
    got = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        if k.strip() in want:
            n = int(v.split()[0])
            name = want[k.strip()]
            got[name] = n / 1000 if name.endswith("_ms") else n
    missing = [v for v in want.values() if v not in got]
    if missing:
        raise Failed(f"criu dump --display-stats printed no {missing}: {text[-500:]}")
    return got


CSV_FIELDS = ["rep", "order", "mib", "way", "mode", "percent", "status", "version", "kind",
              "stop_ms", "park_ms", "capture_ms", "commit_ms", "precopy_ms", "precopy_pages", "freezing_ms", "memdump_ms",
              "memwrite_ms", "cmd_ms", "pages", "bytes", "file_bytes", "disk_bytes",
              "pages_bytes", "snapshot_bytes", "restart_cold_ms", "restart_warm_ms", "note"]


# --- summary ----------------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}"


def span(xs, scale=1.0, digits=1):
    xs = [x * scale for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{fmt(statistics.median(xs), digits)} ({fmt(min(xs), digits)}–{fmt(max(xs), digits)})"


def summarize(rows, mibs, percents):
    """Medians and paired ratios against CRIU of the same repetition, size and percentage."""
    ok = [r for r in rows if r["status"] == "ok"]
    criu = {(r["rep"], r["mib"], r["percent"]): r for r in ok if r["way"] == "criu"}
    out = []
    for mib in mibs:
        for pct in percents:
            for way, mode in WAYS:
                rs = [r for r in rows if r["mib"] == mib and r["percent"] == pct and
                      r["way"] == way and r["mode"] == mode]
                good = [r for r in rs if r["status"] == "ok"]
                s = {"mib": mib, "percent": pct, "way": way, "mode": mode, "n": len(good)}
                if not good:
                    bad = [r for r in rows if r["mib"] == mib and r["way"] == way and
                           r["mode"] == mode and r["status"] != "ok"]
                    s["status"] = bad[0]["status"] if bad else "missing"
                    s["note"] = bad[0]["note"] if bad else None
                    out.append(s)
                    continue
                s["status"] = "ok"
                for f in ("stop_ms", "commit_ms", "bytes", "file_bytes", "restart_cold_ms",
                          "restart_warm_ms", "freezing_ms"):
                    s[f] = [r[f] for r in good]
                def ratio(f, g=None):
                    xs = []
                    for r in good:
                        c = criu.get((r["rep"], mib, pct))
                        if c and r[f] is not None and c[g or f]:
                            xs.append(r[f] / c[g or f])
                    return xs
                s["bytes_over_criu"] = ratio("file_bytes")
                s["stop_over_criu_freeze"] = ratio("stop_ms")
                s["restart_cold_over_criu"] = ratio("restart_cold_ms")
                s["restart_warm_over_criu"] = ratio("restart_warm_ms")
                s["stop_ms_per_gib"] = [r["stop_ms"] / (mib / 1024) for r in good]
                out.append(s)
    return out


def tables(summary):
    lines = []
    lines.append("| MiB | dirty | way | stop ms | commit ms | version MB (on disk) | "
                 "restart cold ms | restart warm ms | size / CRIU | stop / CRIU freeze | "
                 "cold / CRIU | warm / CRIU |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        name = s["way"] if s["mode"] == "-" else f'{s["way"]} {s["mode"]}'
        if s["status"] != "ok":
            lines.append(f'| {s["mib"]} | {s["percent"]}% | {name} | {s["status"]} | | | | | | '
                         f'| | |')
            continue
        crit = s["way"] == "criu"
        lines.append(
            f'| {s["mib"]} | {s["percent"]}% | {name} | {span(s["stop_ms"])} | '
            f'{"–" if crit else span(s["commit_ms"])} | {span(s["file_bytes"], 1e-6)} | '
            f'{span(s["restart_cold_ms"], digits=0)} | {span(s["restart_warm_ms"], digits=0)} | '
            f'{"" if crit else span(s["bytes_over_criu"], digits=3)} | '
            f'{"" if crit else span(s["stop_over_criu_freeze"], digits=3)} | '
            f'{"" if crit else span(s["restart_cold_over_criu"], digits=2)} | '
            f'{"" if crit else span(s["restart_warm_over_criu"], digits=2)} |')
    return "\n".join(lines)


def targets(summary):
    """The targets, each per size: met / missed with the paired median, or not available."""
    res = []
    def find(mib, pct, way, mode):
        for s in summary:
            if (s["mib"], s["percent"], s["way"], s["mode"]) == (mib, pct, way, mode):
                return s
        return None
    mibs = sorted({s["mib"] for s in summary})
    pcts = sorted({s["percent"] for s in summary})
    for mib in mibs:
        for way, mode in [("ickpt-run", "sync"), ("ickpt-run", "async"), ("api", "sync"),
                          ("api", "async")]:
            s = find(mib, 10, way, mode)
            if s is None:
                continue
            name = f"{way} {mode}"
            def add(target, key, limit):
                if s["status"] != "ok":
                    res.append(dict(mib=mib, way=name, target=target, value=None,
                                    limit=limit, met=None, status=s["status"]))
                    return
                v = med(s[key])
                res.append(dict(mib=mib, way=name, target=target, value=v, limit=limit,
                                met=None if v is None else v <= limit, status="ok"))
            add("10% dirty: version / CRIU image", "bytes_over_criu", 1 / 8)
            if mode == "async":
                add("10% dirty: async stop / CRIU freeze", "stop_over_criu_freeze", 1 / 20)
                add("10% dirty: async stop, ms per GiB", "stop_ms_per_gib", 5.0)
        for way, mode in [("ickpt-run", "sync"), ("ickpt-run", "async"), ("api", "sync"),
                          ("api", "async")]:
            for pct in pcts:
                if pct == 0:
                    continue
                s = find(mib, pct, way, mode)
                if s is None:
                    continue
                for temp in ("cold", "warm"):
                    key = f"restart_{temp}_over_criu"
                    target = f"{pct}% dirty: restart / CRIU restore, {temp}"
                    if s["status"] != "ok":
                        res.append(dict(mib=mib, way=f"{way} {mode}", target=target,
                                        value=None, limit=1.2, met=None, status=s["status"]))
                        continue
                    v = med(s[key])
                    res.append(dict(mib=mib, way=f"{way} {mode}", target=target, value=v,
                                    limit=1.2, met=None if v is None else v <= 1.2,
                                    status="ok"))
    return res


def targets_table(res):
    lines = ["| MiB | way | target | paired median | limit | met |", "|---|---|---|---|---|---|"]
    for t in res:
        if t["status"] != "ok":
            lines.append(f'| {t["mib"]} | {t["way"]} | {t["target"]} | {t["status"]} | '
                         f'{t["limit"]:.3g} | – |')
        else:
            met = "–" if t["met"] is None else "yes" if t["met"] else "**no**"
            lines.append(f'| {t["mib"]} | {t["way"]} | {t["target"]} | {fmt(t["value"], 3)} | '
                         f'{t["limit"]:.3g} | {met} |')
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ickpt", required=True)
    ap.add_argument("--dirty", required=True)
    ap.add_argument("--dirty-api", required=True)
    ap.add_argument("--criu", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mibs", default="256,4096")
    ap.add_argument("--percents", default="1,10,50")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=300, help="bound of every wait, seconds")
    ap.add_argument("--header", default="{}", help="JSON of the run's header fields")
    a = ap.parse_args()
    a.mibs = [int(x) for x in a.mibs.split(",")]
    a.percents = [int(x) for x in a.percents.split(",")]
    if os.geteuid() != 0:
        sys.exit("bench-transparent: run as root (CRIU, and dropping the page cache)")
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("bench-transparent: prctl(PR_SET_CHILD_SUBREAPER) failed")
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    load_start = open("/proc/loadavg").read().split()[:3]
    b = Bench(a)
    b.run()
    load_end = open("/proc/loadavg").read().split()[:3]
    seconds = round(time.monotonic() - t0)
    summary = summarize(b.rows, a.mibs, a.percents)
    tg = targets(summary)
    doc = dict(json.loads(a.header), started_utc=started, run_seconds=seconds, reps=a.reps,
               mibs=a.mibs, percents=a.percents, loadavg_start=load_start, loadavg_end=load_end,
               rows=b.rows, summary=summary, targets=tg)
    with open(os.path.join(a.out, "transparent.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.out, "transparent.csv"), "w") as f:
        f.write(",".join(CSV_FIELDS) + "\n")
        for r in b.rows:
            f.write(",".join("" if r[k] is None else
                             '"' + str(r[k]).replace('"', "'") + '"' if k == "note" else
                             str(r[k]) for k in CSV_FIELDS) + "\n")
    print(f"run: {started}, {seconds} s; load average {' '.join(load_start)} at the start, "
          f"{' '.join(load_end)} at the end\n")
    print(tables(summary))
    print()
    print(targets_table(tg))


if __name__ == "__main__":
    main()
