#!/usr/bin/env bash
# tests/mpi/soak.sh [KILLS [MPI [RANKS]]]: the soak run by hand (not part of make test).
# Runs examples/mpi/heat_ickpt.c on RANKS ranks (default 4) of MPI (openmpi or mpich,
# default openmpi) over and over, SIGKILLing every process of the job at a random moment
# (0.2 to 1.7 s after its start) KILLS times in all (default 100), every fifth run left to
# finish; each time the job gets to the end, its checksum must equal the checkpoint-free
# heat.c's, and the job directory is started afresh. Needs `tests/mpi/run.sh` to have built build/mpitests/MPI first. Prints a
# summary line; exits 1 on any wrong checksum, failed restart or surviving process.
set -uo pipefail
kills=${1:-100} impl=${2:-openmpi} n=${3:-4}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=$root/build/mpitests/$impl
steps=3000 cells=200000 every=50
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset ICKPT_FAULT ICKPT_MPI_CRASH ICKPT_MODE
[ -x "$bin/heat_ickpt" ] || { echo "soak: run tests/mpi/run.sh first (no $bin/heat_ickpt)" >&2; exit 2; }
mpi() {
    case $impl in
    openmpi) timeout -k 5 120 mpirun.openmpi --oversubscribe -np "$n" "$@" ;;
    mpich) timeout -k 5 120 mpiexec.mpich -np "$n" "$@" ;;
    esac
}
export -f mpi
export impl n
want=$(mpi "$bin/heat" $steps $cells | sed -n 's/.*checksum //p')
export ICKPT_DIR=$root/build/mpitests/soak-$impl
rm -rf "$ICKPT_DIR"
mid=0 finished=0 bad=0 k=0 runs=0
while [ $k -lt "$kills" ]; do
    out=$(mktemp)
    runs=$((runs + 1))
    if [ $((runs % 5)) -eq 0 ]; then
        # Every fifth run goes to the end unkilled, from wherever the kills left the job, so
        # the result is checked often whatever the MPI's start-up time.
        mpi "$bin/heat_ickpt" $steps $cells $every >"$out" 2>&1
    else
        setsid bash -c 'mpi "$@"' _ "$bin/heat_ickpt" $steps $cells $every >"$out" 2>&1 &
        pid=$!
        disown "$pid" # reaped by the polling below; bash need not report the kill
        sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.2 + rand() * 1.5 }')"
        pkill -KILL -s "$pid" 2>/dev/null
        for i in $(seq 50); do
            pkill -KILL -f "^$bin/" 2>/dev/null
            kill -0 "$pid" 2>/dev/null || pgrep -s "$pid" >/dev/null || pgrep -f "^$bin/" >/dev/null || break
            sleep 0.1
        done
        if pgrep -f "^$bin/" >/dev/null; then
            echo "soak: processes survived SIGKILL" >&2
            exit 1
        fi
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
    rm -f "$out"
done
echo "soak: $impl, $n ranks: $kills kills ($mid mid-run), $runs runs, $finished reached the end (checksum checked), $bad wrong"
[ $bad -eq 0 ]
