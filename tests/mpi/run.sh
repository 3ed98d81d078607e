#!/usr/bin/env bash
# tests/mpi/run.sh: the MPI layer with each MPI Debian ships (Open MPI, MPICH), on 2 and 4
# ranks. For each MPI: install ickpt and libickpt_mpi built with that MPI's mpicc into
# build/prefix-MPI, build the examples and tests/mpi/protocol.c through pkg-config as a user
# would, then:
#   - heat_ickpt uninterrupted prints heat's checksum;
#   - heat_ickpt killed whole (SIGKILL to every process) at random moments (a random number
#     of global versions on, plus 0-50 ms), then run to the end: the checksum is heat's, in C
#     and in Fortran;
#   - one rank killed inside the protocol (ICKPT_MPI_CRASH), after its local commit and after
#     its record, then restarted: every rank restores the same global version (protocol run);
#   - ranks with different storage bandwidths (ICKPT_BANDWIDTH on one rank), killed, resumed;
#   - a store fault on one rank, in its version or in its record (protocol fault), the heat
#     example under the mprotect backend, and mismatched collective calls (misuse).
# Every mpirun is bounded (a hang fails the test). Prints PASS/FAIL per test; exits 0 only
# when nothing failed. ICKPT_MPI_KILLS sets the random kills per campaign (default 3).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/build/mpitests
kills=${ICKPT_MPI_KILLS:-3}
bound=120
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's shared-memory transport wants a writable session directory; keep it in ours.
export OMPI_MCA_orte_tmpdir_base=$out/tmp OMPI_MCA_prte_tmpdir_base=$out/tmp
unset ICKPT_DIR ICKPT_FAULT ICKPT_BANDWIDTH ICKPT_MPI_CRASH ICKPT_MODE ICKPT_BACKEND
mkdir -p "$out"
killed_out=$out/killed-run.out

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() {
    echo "FAIL $1 ($2)"
    failed=$((failed + 1))
    [ -n "${3:-}" ] && [ -s "$3" ] && sed -n '1,30p' "$3" | sed 's/^/    | /'
}

# mpirun for MPI $1 with $2 ranks; the program and its arguments follow.
mpi_run() {
    local impl=$1 n=$2
    shift 2
    case $impl in
    openmpi) timeout -k 5 $bound mpirun.openmpi --oversubscribe -np "$n" "$@" ;;
    mpich) timeout -k 5 $bound mpiexec.mpich -np "$n" "$@" ;;
    esac
}

# MPMD: rank 0 runs `env $2 PROG ARGS`, the other $1-1 ranks run PROG ARGS.
mpi_run_first_env() {
    local impl=$1 n=$2 envs=$3
    shift 3
    case $impl in
    openmpi) timeout -k 5 $bound mpirun.openmpi --oversubscribe -np 1 env $envs "$@" : -np $((n - 1)) "$@" ;;
    mpich) timeout -k 5 $bound mpiexec.mpich -np 1 env $envs "$@" : -np $((n - 1)) "$@" ;;
    esac
}

# The newest global version rank 0 has recorded in $ICKPT_DIR (0: none).
newest_global() {
    local g
    g=$(ls "$ICKPT_DIR/rank-00000" 2>/dev/null | sed -n 's/^g0*\([0-9][0-9]*\)\.global$/\1/p' |
        sort -n | tail -n1)
    echo "${g:-0}"
}

# Run a command (a function above, or a program) in a session of its own until rank 0 has
# recorded global version $1, plus a random 0-50 ms (so the kill lands anywhere in the next
# checkpoint interval, commits included), then SIGKILL every process of that session, and
# make sure none is left (ranks an MPI started in sessions of their own are found by their
# binaries, which live under $out only). Bounded: gives up waiting after $bound seconds.
# The command's output goes to $killed_out: a checksum or "done" line there means it
# finished before the kill.
kill_at_global() {
    local target=$1 i
    shift
    setsid bash -c '"$@"' _ "$@" >"$killed_out" 2>&1 &
    local pid=$!
    for i in $(seq $((bound * 50))); do
        [ "$(newest_global)" -ge "$target" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.02
    done
    sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", rand() * 0.05 }')"
    pkill -KILL -s "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null
    for i in $(seq 50); do
        pkill -KILL -f "^$out/" 2>/dev/null
        pgrep -s "$pid" >/dev/null || pgrep -f "^$out/" >/dev/null || return 0
        sleep 0.1
    done
    echo "processes of $* survived SIGKILL" >&2
    return 1
}
export -f mpi_run mpi_run_first_env
export bound

checksum() { sed -n 's/.*checksum //p' "$1"; }

# Kill campaign: run "$@" $kills times, each killed once a random 1-3 global versions past
# the newest one recorded (the job's last global version is $1, never waited for); fails
# unless at least one kill landed before the job finished and a global version was there to
# resume from.
campaign() {
    local last=$1 mid=0 k target
    shift
    for k in $(seq "$kills"); do
        target=$(($(newest_global) + 1 + RANDOM % 3))
        [ "$target" -lt "$last" ] || break
        kill_at_global "$target" "$@" || return 1
        grep -qE "checksum|protocol: done" "$killed_out" || mid=$((mid + 1))
    done
    if [ $mid -eq 0 ]; then
        echo "no kill landed before the job finished" >&2
        return 1
    fi
    [ "$(newest_global)" -gt 0 ] || {
        echo "no global version after the kills: nothing to resume from" >&2
        return 1
    }
}

# The cost of adoption: heat_ickpt.c is heat.c plus at most 10 lines, and the README and
# docs/mpi.md show exactly those lines.
t="examples/mpi: heat_ickpt.c is heat.c plus at most 10 lines, as the README shows"
diff "$root/examples/mpi/heat.c" "$root/examples/mpi/heat_ickpt.c" >"$out/adoption.diff"
changed=$(grep -c '^[<>]' "$out/adoption.diff")
sed -n 's/^> //p' "$out/adoption.diff" >"$out/adoption.lines"
shown_in() { # the C block of $1 that starts with the include line
    awk '/^```c$/ { inblock = 1; block = ""; next }
         /^```$/ && inblock { if (block ~ /^#include <ickpt_mpi.h>/) { printf "%s", block; exit }
                              inblock = 0; next }
         inblock { block = block $0 "\n" }' "$1"
}
if [ "$changed" -le 10 ] && [ "$(grep -c '^<' "$out/adoption.diff")" -eq 0 ] &&
    [ "$(shown_in "$root/README.md")" = "$(cat "$out/adoption.lines")" ] &&
    [ "$(shown_in "$root/docs/mpi.md")" = "$(cat "$out/adoption.lines")" ]; then
    pass "$t ($changed)"
else
    fail "$t" "$changed lines changed, or README.md / docs/mpi.md show other lines" "$out/adoption.diff"
fi

for impl in openmpi mpich; do
    bin=$out/$impl
    prefix=$root/build/prefix-$impl
    rm -rf "$bin"
    mkdir -p "$bin" "$out/tmp"
    log=$bin/build.log
    if ! { "$root/scripts/install.sh" "$prefix" "$prefix" &&
        "$root/scripts/install-mpi.sh" "$prefix" "$prefix" "mpicc.$impl"; } >"$log" 2>&1; then
        fail "$impl: build" "install-mpi.sh failed" "$log"
        continue
    fi
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    flags=$(pkg-config --cflags --libs ickpt-mpi)
    cc="mpicc.$impl -O2 -Wall -Wextra -Werror"
    if ! { $cc "$root/examples/mpi/heat.c" -o "$bin/heat" &&
        $cc "$root/examples/mpi/heat_ickpt.c" -o "$bin/heat_ickpt" $flags &&
        $cc "$root/tests/mpi/protocol.c" -o "$bin/protocol" $flags &&
        mpicxx.$impl -O2 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX "$root/tests/mpi/cxx_header.cpp" -o "$bin/cxx_header" $flags; } >"$log" 2>&1; then
        fail "$impl: build" "the examples, protocol.c or cxx_header.cpp did not compile" "$log"
        continue
    fi
    fflags=$(pkg-config --cflags --libs ickpt-mpi-fortran)
    fc="mpif90.$impl -O2 -Wall -Werror"
    if ! { $fc "$root/examples/mpi/heat.f90" -o "$bin/heat_f" &&
        $fc "$root/examples/mpi/heat_ickpt.f90" -o "$bin/heat_ickpt_f" $fflags; } >"$log" 2>&1; then
        fail "$impl: build" "the Fortran examples did not compile" "$log"
        continue
    fi
    pass "$impl: build (pkg-config ickpt-mpi, ickpt-mpi-fortran; C, C++, Fortran)"

    t="$impl: a C++ program (mpicxx) inits and finalizes on 2 ranks"
    if ICKPT_DIR=$bin/cxx mpi_run $impl 2 "$bin/cxx_header" >"$bin/cxx.out" 2>&1 &&
        [ -d "$bin/cxx/rank-00001" ] && ! [ -s "$bin/cxx.out" ]; then
        pass "$t"
    else
        fail "$t" "see the output" "$bin/cxx.out"
    fi

    for n in 2 4; do
        t="$impl: heat on $n ranks"
        steps=3000 cells=200000 every=100
        mpi_run $impl $n "$bin/heat" $steps $cells >"$bin/ref.out" 2>&1
        want=$(checksum "$bin/ref.out")
        if [ -z "$want" ]; then
            fail "$t" "heat printed no checksum" "$bin/ref.out"
            continue
        fi
        export ICKPT_DIR=$bin/job-$n
        rm -rf "$ICKPT_DIR"
        mpi_run $impl $n "$bin/heat_ickpt" $steps $cells $every >"$bin/once.out" 2>&1
        got=$(checksum "$bin/once.out")
        [ "$got" = "$want" ] && pass "$t: uninterrupted, same checksum" ||
            fail "$t: uninterrupted" "checksum '$got', heat's '$want'" "$bin/once.out"
        rm -rf "$ICKPT_DIR"
        ok=1
        campaign $((steps / every)) mpi_run $impl $n "$bin/heat_ickpt" $steps $cells $every 2>"$bin/campaign.err" || ok=0
        mpi_run $impl $n "$bin/heat_ickpt" $steps $cells $every >"$bin/killed.out" 2>&1
        got=$(checksum "$bin/killed.out")
        if [ $ok = 1 ] && [ "$got" = "$want" ]; then
            pass "$t: killed $kills times at random, same checksum"
        else
            fail "$t: killed at random" "checksum '$got', heat's '$want' $(cat "$bin/campaign.err")" "$bin/killed.out"
        fi
        unset ICKPT_DIR
    done

    t="$impl: Fortran heat on 2 ranks, killed at random"
    mpi_run $impl 2 "$bin/heat_f" 3000 200000 >"$bin/ref-f.out" 2>&1
    want=$(checksum "$bin/ref-f.out")
    export ICKPT_DIR=$bin/job-f
    rm -rf "$ICKPT_DIR"
    ok=1
    campaign 30 mpi_run $impl 2 "$bin/heat_ickpt_f" 3000 200000 100 2>"$bin/campaign.err" || ok=0
    mpi_run $impl 2 "$bin/heat_ickpt_f" 3000 200000 100 >"$bin/killed-f.out" 2>&1
    got=$(checksum "$bin/killed-f.out")
    if [ $ok = 1 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
        pass "$t: same checksum"
    else
        fail "$t" "checksum '$got', heat.f90's '$want' $(cat "$bin/campaign.err")" "$bin/killed-f.out"
    fi
    unset ICKPT_DIR

    # One rank dies inside the protocol; the restart must agree on one global version. In
    # async mode the agreement runs at the next collective call.
    for c in sync:committed:3:1 sync:recorded:3:0 sync:recorded:3:1 async:committed:3:1 async:recorded:3:0; do
        mode=${c%%:*} point=${c#*:}
        t="$impl: $mode, rank killed at $point (4 ranks)"
        export ICKPT_DIR=$bin/crash-$mode ICKPT_MODE=$mode
        rm -rf "$ICKPT_DIR"
        ICKPT_MPI_CRASH=$point mpi_run $impl 4 "$bin/protocol" run 6 8 >"$bin/crash.out" 2>&1
        if grep -q "protocol: done" "$bin/crash.out"; then
            fail "$t" "the job finished: the crash switch did not fire" "$bin/crash.out"
        elif mpi_run $impl 4 "$bin/protocol" run 6 8 >"$bin/resume.out" 2>&1 &&
            grep -q "protocol: done.*restarted at step [23]$" "$bin/resume.out"; then
            pass "$t: resumed from one global version"
        else
            fail "$t" "the restart failed or resumed elsewhere" "$bin/resume.out"
        fi
        unset ICKPT_DIR ICKPT_MODE
    done

    t="$impl: after a crash left ranks a version apart, a fresh start without restore"
    export ICKPT_DIR=$bin/fresh
    rm -rf "$ICKPT_DIR"
    ICKPT_MPI_CRASH=recorded:3:0 mpi_run $impl 4 "$bin/protocol" run 6 8 >"$bin/crash.out" 2>&1
    if mpi_run $impl 4 "$bin/protocol" fresh 2 8 >"$bin/fresh.out" 2>&1 &&
        mpi_run $impl 4 "$bin/protocol" run 2 8 >"$bin/resume.out" 2>&1 &&
        grep -q "protocol: done.*restarted at step 2$" "$bin/resume.out"; then
        pass "$t: one global version on every rank"
    else
        fail "$t" "see the outputs" "$bin/resume.out"
    fi

    t="$impl: a rank's store lost: init refused on every rank, nothing discarded"
    rm -rf "$ICKPT_DIR/rank-00001"
    before=$(ls "$ICKPT_DIR/rank-00000" | sort | tr '\n' ' ')
    if mpi_run $impl 4 "$bin/protocol" refused >"$bin/refused.out" 2>&1 &&
        grep -q "protocol: refused: ok" "$bin/refused.out" &&
        [ "$(ls "$ICKPT_DIR/rank-00000" | sort | tr '\n' ' ')" = "$before" ]; then
        pass "$t"
    else
        fail "$t" "see the output" "$bin/refused.out"
    fi
    unset ICKPT_DIR

    t="$impl: async, killed at random"
    export ICKPT_DIR=$bin/async ICKPT_MODE=async
    rm -rf "$ICKPT_DIR"
    ok=1
    campaign 40 mpi_run $impl 2 "$bin/protocol" run 40 256 2>"$bin/campaign.err" || ok=0
    if [ $ok = 1 ] && mpi_run $impl 2 "$bin/protocol" run 40 256 >"$bin/async.out" 2>&1 &&
        grep -q "protocol: done" "$bin/async.out"; then
        pass "$t"
    else
        fail "$t" "a restart failed $(cat "$bin/campaign.err")" "$bin/async.out"
    fi
    unset ICKPT_DIR ICKPT_MODE

    t="$impl: rank 0 on a slow store (ICKPT_BANDWIDTH=4M), killed at random"
    export ICKPT_DIR=$bin/slow
    rm -rf "$ICKPT_DIR"
    ok=1
    campaign 40 mpi_run_first_env $impl 2 ICKPT_BANDWIDTH=4M "$bin/protocol" run 40 64 2>"$bin/campaign.err" || ok=0
    if [ $ok = 1 ] && mpi_run_first_env $impl 2 ICKPT_BANDWIDTH=4M "$bin/protocol" run 40 64 >"$bin/slow.out" 2>&1 &&
        grep -q "protocol: done" "$bin/slow.out"; then
        pass "$t"
    else
        fail "$t" "a restart failed $(cat "$bin/campaign.err")" "$bin/slow.out"
    fi
    unset ICKPT_DIR

    t="$impl: a store fault on one rank fails the checkpoint on every rank"
    export ICKPT_DIR=$bin/fault
    rm -rf "$ICKPT_DIR"
    if mpi_run_first_env $impl 2 ICKPT_FAULT=enospc@4096 "$bin/protocol" fault >"$bin/fault.out" 2>&1 &&
        grep -q "protocol: fault: ok (ICKPT_ERR_NO_SPACE)" "$bin/fault.out"; then
        pass "$t"
    else
        fail "$t" "see the output" "$bin/fault.out"
    fi

    t="$impl: a record that fails on one rank, after every rank committed, fails it on all"
    export ICKPT_DIR=$bin/record-fault
    rm -rf "$ICKPT_DIR"
    if mpi_run_first_env $impl 2 ICKPT_FAULT=record:enospc@0 "$bin/protocol" fault >"$bin/record-fault.out" 2>&1 &&
        grep -q "protocol: fault: ok (ICKPT_ERR_NO_SPACE)" "$bin/record-fault.out"; then
        pass "$t"
    else
        fail "$t" "see the output" "$bin/record-fault.out"
    fi

    t="$impl: heat on 2 ranks with the mprotect backend, killed at random"
    export ICKPT_DIR=$bin/mprotect ICKPT_BACKEND=mprotect
    rm -rf "$ICKPT_DIR"
    ok=1
    campaign 30 mpi_run $impl 2 "$bin/heat_ickpt" 3000 200000 100 2>"$bin/campaign.err" || ok=0
    mpi_run $impl 2 "$bin/heat_ickpt" 3000 200000 100 >"$bin/mprotect.out" 2>&1
    mpi_run $impl 2 "$bin/heat" 3000 200000 >"$bin/ref-mp.out" 2>&1
    got=$(checksum "$bin/mprotect.out") want=$(checksum "$bin/ref-mp.out")
    if [ $ok = 1 ] && [ -n "$want" ] && [ "$got" = "$want" ]; then
        pass "$t: same checksum"
    else
        fail "$t" "checksum '$got', heat's '$want' $(cat "$bin/campaign.err")" "$bin/mprotect.out"
    fi
    unset ICKPT_DIR ICKPT_BACKEND

    t="$impl: mismatched collective calls"
    export ICKPT_DIR=$bin/misuse
    rm -rf "$ICKPT_DIR"
    if mpi_run $impl 2 "$bin/protocol" misuse >"$bin/misuse.out" 2>&1 &&
        grep -q "protocol: misuse: ok" "$bin/misuse.out"; then
        pass "$t"
    else
        fail "$t" "see the output" "$bin/misuse.out"
    fi

    t="$impl: a restart with another number of ranks is refused"
    if mpi_run $impl 4 "$bin/protocol" misuse >"$bin/ranks.out" 2>&1; then
        fail "$t" "4 ranks ran on a 2-rank job directory" "$bin/ranks.out"
    elif grep -q "job of 2 ranks" "$bin/ranks.out"; then
        pass "$t"
    else
        fail "$t" "no message naming the job's ranks" "$bin/ranks.out"
    fi
    unset ICKPT_DIR
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
