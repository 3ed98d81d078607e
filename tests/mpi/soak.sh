#!/usr/bin/env bash
# tests/mpi/soak.sh [KILLS [MPI [RANKS]]]: the soak run by hand (not part of make test).
# Runs examples/mpi/heat_ickpt.c on RANKS ranks (default 4) of MPI (openmpi or mpich,
# default openmpi) over and over, SIGKILLing every process of the job at a random moment
# (0.2 to 1.7 s after its start) KILLS times in all (default 100), every fifth run left to
# finish. Each run that gets to the end must print the checksum of the checkpoint-free
# heat.c; then the job directory is started afresh. A killed run must print nothing, a run
# left to finish must succeed. Needs `tests/mpi/run.sh` to have built build/mpitests/MPI
# first. Prints a summary line; exits 1 on any wrong checksum, failed or hung run, or
# surviving process.
set -uo pipefail
kills=${1:-100} impl=${2:-openmpi} n=${3:-4}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/tests/mpi/lib.sh"
mpi_session_dir "$root/build/mpitests/tmp-soak-$impl"
bin=$root/build/mpitests/$impl
run=$(launcher_for "mpicc.$impl")
steps=3000 cells=200000 every=50
unset ICKPT_FAULT ICKPT_MPI_CRASH ICKPT_MODE
[ -x "$bin/heat_ickpt" ] || { echo "soak: run tests/mpi/run.sh first (no $bin/heat_ickpt)" >&2; exit 2; }
want=$(mpi_run "$run" "$n" "$bin/heat" $steps $cells | sed -n 's/.*checksum //p')
[ -n "$want" ] || { echo "soak: heat printed no checksum" >&2; exit 2; }
export ICKPT_DIR=$root/build/mpitests/soak-$impl
rm -rf "$ICKPT_DIR"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
mid=0 finished=0 bad=0 k=0 runs=0 resumed=0
while [ $k -lt "$kills" ]; do
    runs=$((runs + 1))
    [ "$(newest_global "$ICKPT_DIR")" -gt 0 ] && resumed=$((resumed + 1))
    if [ $((runs % 5)) -eq 0 ]; then
        # Every fifth run goes to the end unkilled, from wherever the kills left the job, so
        # the result is checked often whatever the MPI's start-up time.
        if ! mpi_run "$run" "$n" "$bin/heat_ickpt" $steps $cells $every >"$out" 2>&1; then
            bad=$((bad + 1))
            echo "soak: run $runs, left to finish, failed or hung: $(head -n3 "$out")" >&2
            rm -rf "$ICKPT_DIR"
            continue
        fi
    else
        setsid bash -c '"$@"' _ mpi_run "$run" "$n" "$bin/heat_ickpt" $steps $cells $every >"$out" 2>&1 &
        pid=$!
        sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.2 + rand() * 1.5 }')"
        kill_session "$pid" "$bin/" || exit 1
        k=$((k + 1))
    fi
    got=$(sed -n 's/.*checksum //p' "$out")
    if [ -n "$got" ]; then
        finished=$((finished + 1))
        if [ "$got" != "$want" ]; then
            bad=$((bad + 1))
            echo "soak: run $runs finished with checksum $got, heat's $want" >&2
        fi
        rm -rf "$ICKPT_DIR"
    elif [ -s "$out" ]; then
        # A killed run prints nothing; anything else (an ickpt error) is a failure.
        bad=$((bad + 1))
        echo "soak: run $runs failed: $(head -n3 "$out")" >&2
    else
        mid=$((mid + 1))
    fi
done
echo "soak: $impl, $n ranks: $kills kills ($mid mid-run), $runs runs ($resumed started from a global version), $finished reached the end (checksum checked), $bad wrong"
[ $bad -eq 0 ]
