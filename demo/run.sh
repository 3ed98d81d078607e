#!/usr/bin/env bash
# make demo: the heat-diffusion demo. Builds demo/heat.c against an installed ickpt, then
#   a. runs it without checkpointing (reference grid A, baseline time),
#   b. runs it with checkpointing (checkpoint sizes and times, overhead), then with async
#      checkpointing (overhead),
#   c. runs it with async checkpointing, kills it with SIGKILL mid-run (while a commit may
#      be running), restarts it: it restores the latest committed checkpoint and finishes
#      (grid B),
#   d. checks that A and B are byte for byte identical,
#   e. runs the MPI example on 4 ranks, kills the whole job after its third global version,
#      restarts it, and checks its checksum against the checkpoint-free MPI code.
# Usage: demo/run.sh STAGE   (STAGE: an ickpt install prefix, e.g. build/prefix)
set -euo pipefail

ITERS=200
EVERY=10
KILL_AFTER=4 # checkpoints seen before the kill

die() {
    echo "demo: $*" >&2
    exit 1
}

[[ $# -eq 1 ]] || die "usage: $0 STAGE"
[[ -f $1/lib/pkgconfig/ickpt.pc ]] || die "$1 holds no ickpt install (run 'make stage')"
STAGE=$(cd "$1" && pwd)
DEMO_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$(dirname "$DEMO_SRC")/build/demo
HEAT=$OUT/heat

# The killed run is the only background process; make sure no exit path leaves it behind.
HEAT_PID=
cleanup() {
    if [[ -n $HEAT_PID ]]; then
        kill -9 "$HEAT_PID" 2>/dev/null || true
        wait "$HEAT_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Prints the value of key=value in a heat output line.
field() {
    [[ " $1 " =~ \ $2=([^ ]*)\  ]] || die "no '$2=' in line: $1"
    printf '%s\n' "${BASH_REMATCH[1]}"
}

# Runs heat in the foreground with its stdout in LOG; prints the seconds from its done line.
run_heat() {
    local log=$1
    shift
    "$HEAT" "$@" >"$log" || die "heat $* failed (exit $?); its output is in $log"
    field "$(grep '^done ' "$log")" seconds
}

rm -rf "$OUT"
mkdir -p "$OUT"

echo "== ickpt demo: 2-D heat diffusion, 64 MiB grid, $ITERS iterations, checkpoint every $EVERY =="
echo "building $HEAT against $STAGE"
PC_FLAGS=$(PKG_CONFIG_PATH="$STAGE/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    pkg-config --cflags --libs ickpt)
read -ra PC_FLAGS <<<"$PC_FLAGS"
"${CC:-cc}" -O2 -Wall -Wextra -Werror -o "$HEAT" "$DEMO_SRC/heat.c" "${PC_FLAGS[@]}"

# a. Reference.
echo "[a] reference run, no checkpointing"
T_PLAIN=$(run_heat "$OUT/run-a.log" --no-ckpt --iters "$ITERS" --every "$EVERY" --out "$OUT/grid-a.bin")

# b. Uninterrupted with checkpoints.
echo "[b] uninterrupted run with checkpointing"
T_CKPT=$(run_heat "$OUT/run-b.log" --dir "$OUT/store-b" --iters "$ITERS" --every "$EVERY" \
    --out "$OUT/grid-b-uninterrupted.bin")
echo "    $(grep '^tracking ' "$OUT/run-b.log") (ICKPT_BACKEND picks another; see 'ickpt probe')"
echo "[b] uninterrupted run with async checkpointing"
T_ASYNC=$(run_heat "$OUT/run-b-async.log" --dir "$OUT/store-b-async" --async --iters "$ITERS" \
    --every "$EVERY" --out "$OUT/grid-b-async.bin")
cmp -s "$OUT/grid-b-uninterrupted.bin" "$OUT/grid-b-async.bin" ||
    die "sync and async runs computed different grids"

# c. Killed mid-run, then restarted. heat flushes every checkpoint line, so reading its
# stdout through a fifo tells us exactly when checkpoint KILL_AFTER was requested; its commit
# may still be running when the kill lands, and the restart then restores the one before.
echo "[c] run with async checkpointing, killed with SIGKILL after checkpoint $KILL_AFTER"
C_ARGS=(--dir "$OUT/store-c" --async --iters "$ITERS" --every "$EVERY" --out "$OUT/grid-b.bin")
mkfifo "$OUT/run-c.fifo"
"$HEAT" "${C_ARGS[@]}" >"$OUT/run-c.fifo" &
HEAT_PID=$!
exec {fifo}<"$OUT/run-c.fifo"
seen=0
last_ckpt=
while IFS= read -r line <&"$fifo"; do
    printf '%s\n' "$line" >>"$OUT/run-c-killed.log"
    if [[ $line == "ckpt "* ]]; then
        seen=$((seen + 1))
        last_ckpt=$line
        if ((seen == KILL_AFTER)); then
            kill -9 "$HEAT_PID"
            break
        fi
    fi
done
exec {fifo}<&-
status=0
# 2>/dev/null: bash would report the kill we asked for as "Killed".
wait "$HEAT_PID" 2>/dev/null || status=$?
HEAT_PID=
((seen == KILL_AFTER)) || die "heat stopped after $seen checkpoints (exit $status); see $OUT/run-c-killed.log"
((status == 128 + 9)) || die "heat was not killed mid-run (exit $status); raise ITERS"
echo "    killed (exit $status) right after: $last_ckpt"

"$HEAT" "${C_ARGS[@]}" >"$OUT/run-c-restart.log" ||
    die "restarted heat failed (exit $?); its output is in $OUT/run-c-restart.log"
restored=$(grep '^restored ' "$OUT/run-c-restart.log") || die "the restarted heat did not restore"
R_VERSION=$(field "$restored" version)
R_ITER=$(field "$restored" iter)
R_MS=$(field "$restored" ms)
R_CKPTS=$(grep -c '^ckpt ' "$OUT/run-c-restart.log" || true)
echo "    restarted: restored version $R_VERSION (iteration $R_ITER) in $R_MS ms," \
    "then $R_CKPTS more checkpoints to iteration $ITERS"

# Report.
echo
echo "Checkpoints of run [b]:"
grep '^ckpt ' "$OUT/run-b.log" | awk '
    function f(k,   i, kv) {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
    }
    BEGIN { printf "  %7s  %-11s  %5s  %7s  %9s  %8s\n", "version", "kind", "iter", "pages", "size MiB", "time ms" }
    { printf "  %7s  %-11s  %5s  %7s  %9.2f  %8s\n", f("version"), f("kind"), f("iter"), f("pages"), f("bytes") / 1048576, f("ms") }'

echo
echo "Summary:"
awk -v plain="$T_PLAIN" -v ckpt="$T_CKPT" -v async="$T_ASYNC" -v rms="$R_MS" -v rv="$R_VERSION" -v ri="$R_ITER" '
    function f(k,   i, kv) {
        for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] }
    }
    /^ckpt / { n[f("kind")]++; b[f("kind")] += f("bytes"); p[f("kind")] += f("pages") }
    END {
        printf "  %-34s %8.3f s\n", "run time without checkpointing", plain
        printf "  %-34s %8.3f s   (overhead %.1f %%)\n", "run time with checkpointing", ckpt, (ckpt - plain) / plain * 100
        printf "  %-34s %8.3f s   (overhead %.1f %%)\n", "  ... with async checkpointing", async, (async - plain) / plain * 100
        printf "  %-34s %8.1f ms  (version %s, iteration %s)\n", "restart (restore) time", rms, rv, ri
        if (n["full"] > 0)
            printf "  %-34s %8.2f MiB (%d checkpoints, %d pages each)\n", "full checkpoint, average size", b["full"] / n["full"] / 1048576, n["full"], p["full"] / n["full"]
        if (n["incremental"] > 0) {
            printf "  %-34s %8.2f MiB (%d checkpoints, %d pages each", "incremental checkpoint, average", b["incremental"] / n["incremental"] / 1048576, n["incremental"], p["incremental"] / n["incremental"]
            if (n["full"] > 0)
                printf ", %.1f %% of a full one", (b["incremental"] / n["incremental"]) / (b["full"] / n["full"]) * 100
            printf ")\n"
        }
    }' "$OUT/run-b.log"

# The CLI is optional: show its view of the restarted run's store when it works.
TIMEOUT=()
if command -v timeout >/dev/null; then TIMEOUT=(timeout 20); fi
if [[ -x $STAGE/bin/ickpt ]] &&
    "${TIMEOUT[@]}" "$STAGE/bin/ickpt" ls --dir "$OUT/store-c" >"$OUT/ickpt-ls.txt" 2>&1 &&
    [[ -s $OUT/ickpt-ls.txt ]]; then
    echo
    echo "ickpt ls --dir $OUT/store-c:"
    sed 's/^/  /' "$OUT/ickpt-ls.txt"
fi

echo
if cmp_out=$(cmp "$OUT/grid-a.bin" "$OUT/grid-b.bin" 2>&1); then
    echo "restart verified: identical"
else
    echo "restart verified: DIFFERENT ($cmp_out)"
    exit 1
fi

# e. The MPI example (examples/mpi/heat_ickpt.c) on 4 ranks: killed whole (SIGKILL to every
# process of the job) once its third global version is recorded, run again, and compared with
# the checkpoint-free heat.c.
MPI_RANKS=4 MPI_STEPS=3000 MPI_CELLS=250000 MPI_EVERY=100
echo
echo "== MPI: examples/mpi/heat_ickpt.c on $MPI_RANKS ranks ($MPI_STEPS steps, global version every $MPI_EVERY) =="
MPI_SRC=$(dirname "$DEMO_SRC")/examples/mpi
MPI_FLAGS=$(PKG_CONFIG_PATH="$STAGE/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" \
    pkg-config --cflags --libs ickpt-mpi)
read -ra MPI_FLAGS <<<"$MPI_FLAGS"
MPICC=${MPICC:-mpicc}
"$MPICC" -O2 -o "$OUT/mpi-heat" "$MPI_SRC/heat.c"
"$MPICC" -O2 -o "$OUT/mpi-heat-ickpt" "$MPI_SRC/heat_ickpt.c" "${MPI_FLAGS[@]}"
MPI_BOUND=300
. "$(dirname "$DEMO_SRC")/tests/mpi/lib.sh"
mpi_session_dir "$OUT/mpi-session"
LAUNCHER=$(launcher_for "$MPICC") # the launcher of the MPI the program was built with
mpi_run "$LAUNCHER" "$MPI_RANKS" "$OUT/mpi-heat" "$MPI_STEPS" "$MPI_CELLS" >"$OUT/mpi-ref.log" 2>&1 ||
    die "heat (MPI) failed; see $OUT/mpi-ref.log"
WANT=$(sed -n 's/.*checksum //p' "$OUT/mpi-ref.log")
echo "[e] reference (no checkpoints): checksum $WANT"
export ICKPT_DIR=$OUT/mpi-job
setsid bash -c '"$@"' _ mpi_run "$LAUNCHER" "$MPI_RANKS" "$OUT/mpi-heat-ickpt" "$MPI_STEPS" \
    "$MPI_CELLS" "$MPI_EVERY" >"$OUT/mpi-killed.log" 2>&1 &
HEAT_PID=$!
# Bounded poll for the job's third global version (its record in rank 0's store).
for _ in $(seq 1200); do
    (($(newest_global "$ICKPT_DIR") >= 3)) && break
    kill -0 "$HEAT_PID" 2>/dev/null || break
    sleep 0.05
done
(($(newest_global "$ICKPT_DIR") >= 3)) || die "no third global version; see $OUT/mpi-killed.log"
kill_session "$HEAT_PID" "$OUT/mpi-heat-ickpt" || die "the killed job's processes survived"
HEAT_PID=
echo "[e] killed every process of the job once rank 0 had recorded global version 3"
mpi_run "$LAUNCHER" "$MPI_RANKS" "$OUT/mpi-heat-ickpt" "$MPI_STEPS" "$MPI_CELLS" "$MPI_EVERY" \
    >"$OUT/mpi-restart.log" 2>&1 || die "the restarted MPI job failed; see $OUT/mpi-restart.log"
# Resumed, not started over: the last global version is the job's last, not more.
LAST=$(newest_global "$ICKPT_DIR")
((LAST == MPI_STEPS / MPI_EVERY)) ||
    die "the restart ended at global version $LAST, not $((MPI_STEPS / MPI_EVERY)): it did not resume"
GOT=$(sed -n 's/.*checksum //p' "$OUT/mpi-restart.log")
if [[ -x $STAGE/bin/ickpt ]]; then
    echo "[e] rank 0's store after the restart (ickpt ls):"
    "$STAGE/bin/ickpt" ls --dir "$ICKPT_DIR/rank-00000" 2>&1 | sed 's/^/  /'
fi
unset ICKPT_DIR
if [[ $GOT == "$WANT" ]]; then
    echo "MPI restart verified: identical checksum ($GOT)"
else
    echo "MPI restart verified: DIFFERENT (restarted $GOT, reference $WANT)"
    exit 1
fi
