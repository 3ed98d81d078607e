#!/usr/bin/env bash
# bench-mpi.sh STAGE OUT: make bench-mpi. Coordination cost of a global checkpoint against
# the same local commit, at 1, 2 and 4 ranks (tests/mpi/bench_mpi.c), and restart time, with
# the MPI of the default mpicc (MPICC overrides; its launcher goes with it), against the
# ickpt installed in STAGE.
# Writes OUT/mpi.json (the run header and one object per measurement) and OUT/mpi.csv.
set -euo pipefail
stage=$1; out=$2
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/mpi/lib.sh"
MPI_BOUND=600
mpicc=${MPICC:-mpicc}
launcher=$(launcher_for "$mpicc")
mib=${BENCH_MPI_MIB:-64} reps=${BENCH_MPI_REPS:-7}
work=$root/build/bench-mpi
rm -rf "$work"; mkdir -p "$work" "$out"
mpi_session_dir "$work/session"
export PKG_CONFIG_PATH="$stage/lib/pkgconfig"
"$mpicc" -O2 -Wall -Wextra -Werror "$root/tests/mpi/bench_mpi.c" -o "$work/bench_mpi" \
  $(pkg-config --cflags --libs ickpt-mpi)
unset ICKPT_MODE ICKPT_FAULT ICKPT_MPI_CRASH
started=$(date -u +%Y-%m-%dT%H:%M:%SZ) t0=$(date +%s)
lines=$work/lines
: >"$lines"
for n in 1 2 4; do
  for pct in 1 10 50; do
    export ICKPT_DIR=$work/job-$n-$pct
    echo "bench-mpi: $n rank(s), $mib MiB each, $pct% dirty, $reps pairs" >&2
    mpi_run "$launcher" "$n" "$work/bench_mpi" checkpoint "$mib" "$pct" "$reps" >>"$lines"
    mpi_run "$launcher" "$n" "$work/bench_mpi" restart "$mib" >>"$lines"
    rm -rf "$ICKPT_DIR"
  done
done
machine="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, Linux $(uname -r)"
mpi=$("$launcher" --version 2>&1 | head -n1)
seconds=$(($(date +%s) - t0))
commit=$(git -C "$root" describe --always --dirty --abbrev=40 2>/dev/null || echo unknown)
/usr/bin/python3 - "$lines" "$out" "$machine" "$mpi" "$commit" "$mib" "$reps" "$started" "$seconds" <<'PY'
import json, sys
lines, out, machine, mpi, commit, mib, reps, started, seconds = sys.argv[1:]
rows = [json.loads(l) for l in open(lines) if l.strip()]
doc = {"machine": machine, "mpi": mpi, "git_commit": commit, "started_utc": started,
       "run_seconds": int(seconds), "mib_per_rank": int(mib), "reps": int(reps),
       "mode": "sync", "backends": sorted({r["backend"] for r in rows if "backend" in r}),
       "results": rows}
open(f"{out}/mpi.json", "w").write(json.dumps(doc, indent=2) + "\n")
with open(f"{out}/mpi.csv", "w") as f:
    f.write("ranks,dirty_percent,global_ms,local_ms,median_ratio,restart_ms\n")
    restarts = {}
    for r in rows:
        if r["what"] == "restart":
            restarts.setdefault(r["ranks"], []).append(r["restart_ms"])
    k = {}
    for r in rows:
        if r["what"] == "checkpoint":
            i = k.get(r["ranks"], 0); k[r["ranks"]] = i + 1
            f.write(f'{r["ranks"]},{r["dirty_percent"]},{r["global_ms"]},{r["local_ms"]},'
                    f'{r["median_ratio"]},{restarts[r["ranks"]][i]}\n')
print(open(f"{out}/mpi.csv").read(), end="")
PY
