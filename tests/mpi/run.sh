#!/usr/bin/env bash
# tests/mpi/run.sh: the MPI layer with each MPI Debian ships (Open MPI, MPICH), on 2 and 4
# ranks. For each MPI: install ickpt and libickpt_mpi built with that MPI's mpicc into
# build/prefix-MPI (checking that it carries no test switch, then replacing it with the test
# build, which has ICKPT_MPI_CRASH), build the examples, tests/mpi/protocol.c and a C++ program through
# pkg-config as a user would, then:
#   - heat_ickpt uninterrupted prints heat's checksum;
#   - MPI_Recv, a strided MPI_Sendrecv, MPI_Allreduce, MPI_Bcast, and an MPI_Irecv and a
#     persistent receive pending across a checkpoint, straight into protected memory under the
#     mprotect backend (tests/mpi/recv_protected.c; in Fortran recv_protected.f90; and over
#     TCP): the bytes received, and after a restart the same bytes restored, with no EFAULT
#     reported by MPI (libickpt_mpi's receive wrappers, mpi/ickpt_mpi_recv.c);
#   - CAPE's parallel Markov loop (examples/cape/markov_mpi.c) on 2 and 4 ranks prints the
#     sequential run's checksum; tests/mpi/sections.f90 saves and replays sections in Fortran;
#   - heat_ickpt killed whole (SIGKILL to every process) at random moments (a random number
#     of global versions on, plus 0-50 ms), then run to the end: the checksum is heat's, and
#     the run resumed (its last global version is the job's last, not more), in C and in
#     Fortran, and under the mprotect backend;
#   - one rank killed inside the protocol (ICKPT_MPI_CRASH), after its local commit and after
#     its record, sync and async, then restarted: every rank restores the same global version
#     (protocol run), the one the crash point allows;
#   - ranks with different storage bandwidths (ICKPT_BANDWIDTH on one rank), async mode,
#     killed, resumed;
#   - a store fault on one rank, in its version or in its record (protocol fault), mismatched
#     collective calls (misuse), a wrong number of ranks, a rank's store lost, a fresh start
#     after a crash.
# Every mpirun is bounded (a hang fails the test). Prints PASS/FAIL per test; exits 0 only
# when nothing failed. ICKPT_MPI_KILLS sets the random kills per campaign (default 3).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/tests/mpi/lib.sh"
out=$root/build/mpitests
kills=${ICKPT_MPI_KILLS:-3}
mpi_session_dir "$out/tmp"
unset ICKPT_DIR ICKPT_FAULT ICKPT_BANDWIDTH ICKPT_MPI_CRASH ICKPT_MODE ICKPT_BACKEND \
    ICKPT_SHARED_DIR ICKPT_DRAIN_BANDWIDTH
mkdir -p "$out"
killed_out=$out/killed-run.out
# Cases run in subshells (each with its own ICKPT_DIR and switches), so results go to a file.
results=$out/results
: >"$results"

pass() { echo "PASS $1"; echo pass >>"$results"; }
fail() {
    echo "FAIL $1 ($2)"
    echo fail >>"$results"
    [ -n "${3:-}" ] && [ -s "$3" ] && sed -n '1,30p' "$3" | sed 's/^/    | /'
}

checksum() { sed -n 's/.*checksum //p' "$1"; }

# switch_free LIB: LIB carries no test kill switch (no ICKPT_MPI_CRASH string) and reads no
# environment variable (no getenv among the symbols it needs).
switch_free() {
    ! strings -a "$1" | grep -q ICKPT_MPI_CRASH &&
        ! nm -D --undefined-only "$1" | grep -qwE 'getenv|secure_getenv'
}

# A case's job directory $bin/$1, new and empty, as ICKPT_DIR.
job() {
    export ICKPT_DIR=$bin/$1
    rm -rf "$ICKPT_DIR"
}

# expect T PATTERN CMD...: CMD succeeds and its output (in $bin/out) matches PATTERN.
expect() {
    local t=$1 pattern=$2
    shift 2
    if "$@" >"$bin/out" 2>&1 && grep -qE "$pattern" "$bin/out"; then
        pass "$t"
    else
        fail "$t" "exit status or output wrong, wanted /$pattern/" "$bin/out"
    fi
}

# refuses T MESSAGE CMD...: CMD fails, and its output says MESSAGE (what was wrong, and where).
refuses() {
    local t=$1 message=$2
    shift 2
    if "$@" >"$bin/out" 2>&1; then
        fail "$t" "it ran" "$bin/out"
    elif grep -qF -- "$message" "$bin/out"; then
        pass "$t"
    else
        fail "$t" "no message saying '$message'" "$bin/out"
    fi
}

# Run CMD in a session of its own until rank 0 has recorded global version $1, plus a
# random 0-50 ms (so the kill lands anywhere in the next checkpoint interval, commits
# included), then kill the job whole. Bounded: it gives up waiting after MPI_BOUND seconds.
# The output goes to $killed_out: a checksum or "done" line there means the job finished
# before the kill.
kill_at_global() {
    local target=$1 i
    shift
    setsid bash -c '"$@"' _ "$@" >"$killed_out" 2>&1 &
    local pid=$!
    for i in $(seq $((MPI_BOUND * 50))); do
        [ "$(newest_global "$ICKPT_DIR")" -ge "$target" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.02
    done
    sleep "$(random_delay 0.05)"
    kill_session "$pid" "$out/"
}

# Kill campaign: run CMD $kills times, each killed once a random 1-3 global versions past
# the newest one recorded (the job's last global version is $1, never waited for); fails
# unless at least one kill landed before the job finished and a global version was there to
# resume from.
campaign() {
    local last=$1 mid=0 k target
    shift
    for k in $(seq "$kills"); do
        target=$(($(newest_global "$ICKPT_DIR") + 1 + RANDOM % 3))
        [ "$target" -lt "$last" ] || break
        kill_at_global "$target" "$@" || return 1
        grep -qE "checksum|protocol: done" "$killed_out" || mid=$((mid + 1))
    done
    if [ $mid -eq 0 ]; then
        echo "no kill landed before the job finished" >&2
        return 1
    fi
    [ "$(newest_global "$ICKPT_DIR")" -gt 0 ] || {
        echo "no global version after the kills: nothing to resume from" >&2
        return 1
    }
}

# resumes T LAST WANT CMD...: in a fresh job directory, a kill campaign on CMD, then CMD run
# to the end. It must have resumed, not started over: the job's last global version is LAST
# (one started over would have gone past it), and its output prints the checksum WANT, or
# with WANT "protocol", that it restarted at a step above 0.
resumes() {
    local t=$1 last=$2 want=$3
    shift 3
    rm -rf "$ICKPT_DIR"
    if ! campaign "$last" "$@" 2>"$bin/campaign.err"; then
        fail "$t" "$(cat "$bin/campaign.err")" "$killed_out"
        return
    fi
    "$@" >"$bin/final.out" 2>&1
    local ok=1 g
    g=$(newest_global "$ICKPT_DIR")
    [ "$g" -eq "$last" ] || ok=0
    if [ "$want" = protocol ]; then
        grep -qE "protocol: done.*restarted at step [1-9]" "$bin/final.out" || ok=0
    else
        [ -n "$want" ] && [ "$(checksum "$bin/final.out")" = "$want" ] || ok=0
    fi
    if [ $ok = 1 ]; then
        pass "$t"
    else
        fail "$t" "last global version $g (want $last), output wrong (want ${want:-a checksum})" "$bin/final.out"
    fi
}

# receives T PROG: tests/mpi/PROG (recv_protected.c or .f90) run, then restarted, on 2 ranks:
# each prints that it checked the bytes, and no MPI message reports EFAULT (Open MPI reports
# "errno = 14" and goes on).
receives() {
    local t=$1 prog=$2 mode
    for mode in run restart; do
        if ! mpi_run "$run" 2 "$bin/$prog" $mode >"$bin/out" 2>&1 ||
            ! grep -q "^$prog: $mode: ok" "$bin/out"; then
            fail "$t" "the $mode failed" "$bin/out"
            return
        elif grep -qE "errno = 14|Bad address" "$bin/out"; then
            fail "$t" "MPI reported EFAULT in the $mode" "$bin/out"
            return
        fi
    done
    pass "$t"
}

# crashes T POINT STEPS: ICKPT_MPI_CRASH=POINT kills one rank of a 4-rank protocol run; the
# job must not finish, and the restart must resume every rank at one of the steps STEPS (a
# regex: after a kill at `committed:3` only global version 2 exists anywhere, so only step 2
# is right; after `recorded:3` step 2 or 3).
crashes() {
    local t=$1 point=$2 steps=$3
    rm -rf "$ICKPT_DIR"
    ICKPT_MPI_CRASH=$point mpi_run "$run" 4 "$bin/protocol" run 6 8 >"$bin/crash.out" 2>&1
    if grep -q "protocol: done" "$bin/crash.out"; then
        fail "$t" "the job finished: the crash switch did not fire" "$bin/crash.out"
        return 1
    fi
    expect "$t: resumed from one global version" "protocol: done.*restarted at step $steps\$" \
        mpi_run "$run" 4 "$bin/protocol" run 6 8
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

steps=3000 cells=200000 every=100
for impl in openmpi mpich; do
    bin=$out/$impl
    prefix=$root/build/prefix-$impl
    run=$(launcher_for "mpicc.$impl")
    rm -rf "$bin"
    mkdir -p "$bin"
    log=$bin/build.log
    if ! { "$root/scripts/install.sh" "$prefix" "$prefix" &&
        "$root/scripts/install-mpi.sh" "$prefix" "$prefix" "mpicc.$impl"; } >"$log" 2>&1; then
        fail "$impl: build" "install-mpi.sh failed" "$log"
        continue
    fi
    # The library as installed for users, then the test build the cases below need (the
    # check must see the switch there, or it proves nothing).
    t="$impl: the installed libickpt_mpi.so has no test switch and reads no environment variable"
    if ! switch_free "$prefix/lib/libickpt_mpi.so"; then
        fail "$t" "ICKPT_MPI_CRASH or getenv found in it"
    elif ! "$root/scripts/install-mpi.sh" "$prefix" "$prefix" "mpicc.$impl" --test-switches \
        >>"$log" 2>&1; then
        fail "$impl: build" "install-mpi.sh --test-switches failed" "$log"
        continue
    elif switch_free "$prefix/lib/libickpt_mpi.so"; then
        fail "$t" "the check finds no switch in the test build either"
    else
        pass "$t"
    fi
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    flags=$(pkg-config --cflags --libs ickpt-mpi)
    fflags=$(pkg-config --cflags --libs ickpt-mpi-fortran)
    cc="mpicc.$impl -O2 -Wall -Wextra -Werror"
    fc="mpif90.$impl -O2 -Wall -Werror"
    if ! { $cc "$root/examples/mpi/heat.c" -o "$bin/heat" &&
        $cc "$root/examples/mpi/heat_ickpt.c" -o "$bin/heat_ickpt" $flags &&
        $cc "$root/tests/mpi/protocol.c" -o "$bin/protocol" $flags &&
        $cc "$root/tests/mpi/recv_protected.c" -o "$bin/recv_protected" $flags &&
        $cc "$root/examples/cape/markov.c" -o "$bin/markov" $flags &&
        $cc "$root/examples/cape/markov_mpi.c" -o "$bin/markov_mpi" $flags &&
        mpicxx.$impl -O2 -Wall -Wextra -Werror -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX \
            "$root/tests/mpi/cxx_header.cpp" -o "$bin/cxx_header" $flags &&
        $fc "$root/examples/mpi/heat.f90" -o "$bin/heat_f" &&
        $fc "$root/examples/mpi/heat_ickpt.f90" -o "$bin/heat_ickpt_f" $fflags &&
        $fc "$root/tests/mpi/sections.f90" -o "$bin/sections_f" $fflags &&
        $fc "$root/tests/mpi/recv_protected.f90" -o "$bin/recv_protected_f" $fflags; } >"$log" 2>&1; then
        fail "$impl: build" "an example or a test program (protocol.c, recv_protected.c or .f90, cxx_header.cpp) did not compile" "$log"
        continue
    fi
    pass "$impl: build (pkg-config ickpt-mpi, ickpt-mpi-fortran; C, C++, Fortran)"

    (
        # CAPE's parallel loop: the ranks' section deltas exchanged and injected
        # every iteration give the sequential program's vector, bit for bit.
        want=$(ICKPT_DIR=$bin/markov-serial "$bin/markov" 600 30 none | sed -n 's/^checksum //p')
        job sections-f
        mkdir -m 700 -p "$ICKPT_DIR"
        expect "$impl: program sections through the Fortran module, saved and replayed" \
            "sections_f: ok" "$bin/sections_f" "$ICKPT_DIR"
        for n in 2 4; do
            job cape-$n
            expect "$impl: CAPE's parallel Markov loop on $n ranks equals the sequential run" \
                "checksum $want\$" mpi_run "$run" $n "$bin/markov_mpi" 600 30
        done
    )

    (
        # With the mprotect backend a clean protected page is read-only, and MPI writing it from
        # the kernel (single-copy shared memory's process_vm_readv, a TCP socket's read) fails
        # with EFAULT (MPICH aborts, Open MPI reports it and falls back, or hangs on TCP) unless
        # libickpt_mpi's wrappers took the page's first write before the call. From C, and
        # from Fortran, whose bindings reach the wrappers by the MPI_ or the PMPI_ names.
        export ICKPT_BACKEND=mprotect
        for prog in recv_protected recv_protected_f; do
            job "$prog-job" # not $prog: that is the program
            receives "$impl: $prog: MPI receives and collectives into protected memory (mprotect), restored after a restart" $prog
        done
        # Over TCP, as between nodes.
        if [ $impl = openmpi ]; then tcp=OMPI_MCA_btl=tcp,self; else tcp=UCX_TLS=tcp,self; fi
        export "$tcp"
        job recv-tcp
        receives "$impl: recv_protected over TCP ($tcp)" recv_protected
    )

    (
        job cxx
        expect "$impl: a C++ program (mpicxx) inits and finalizes on 2 ranks" "cxx_header: ok" \
            mpi_run "$run" 2 "$bin/cxx_header"
    )

    for n in 2 4; do
        (
            t="$impl: heat on $n ranks"
            mpi_run "$run" $n "$bin/heat" $steps $cells >"$bin/ref.out" 2>&1
            want=$(checksum "$bin/ref.out")
            [ -n "$want" ] || { fail "$t" "heat printed no checksum" "$bin/ref.out"; exit; }
            job heat-$n
            expect "$t: uninterrupted, same checksum" "checksum $want\$" \
                mpi_run "$run" $n "$bin/heat_ickpt" $steps $cells $every
            resumes "$t: killed $kills times at random, resumed, same checksum" $((steps / every)) \
                "$want" mpi_run "$run" $n "$bin/heat_ickpt" $steps $cells $every
            [ $n = 2 ] || exit
            export ICKPT_BACKEND=mprotect
            resumes "$t with the mprotect backend: killed at random, resumed, same checksum" \
                $((steps / every)) "$want" mpi_run "$run" $n "$bin/heat_ickpt" $steps $cells $every
        )
    done

    (
        # The job ends (ickpt_mpi_finalize waits for the drain), its nodes' local directories
        # are lost; run again, it restores the last global version from the shared tier.
        t="$impl: heat on 2 ranks with ICKPT_SHARED_DIR, local directories lost"
        mpi_run "$run" 2 "$bin/heat" $steps $cells >"$bin/ref.out" 2>&1
        want=$(checksum "$bin/ref.out")
        job tiers-local
        export ICKPT_SHARED_DIR=$bin/tiers-shared
        rm -rf "$ICKPT_SHARED_DIR"
        if ! mpi_run "$run" 2 "$bin/heat_ickpt" $steps $cells $every >"$bin/tiers1.out" 2>&1; then
            fail "$t" "the first run failed" "$bin/tiers1.out"
        elif [ "$(newest_global "$ICKPT_SHARED_DIR")" -ne $((steps / every)) ]; then
            fail "$t" "the shared tier's newest global version is $(newest_global "$ICKPT_SHARED_DIR"), not $((steps / every))"
        else
            rm -rf "$ICKPT_DIR"
            expect "$t: same checksum" "checksum $want\$" \
                mpi_run "$run" 2 "$bin/heat_ickpt" $steps $cells $every
            # Resumed at the last step, it checkpointed nothing (a run started over would).
            if ls "$ICKPT_DIR/rank-00000" | grep -q '^v'; then
                fail "$t: resumed" "the second run wrote versions: it started over"
            else
                pass "$t: resumed from the shared tier"
            fi
        fi
    )
    (
        # Rank 0's drain lags far behind rank 1's when the nodes are lost: the shared tiers
        # hold newest global versions far apart, and the restart agrees on the newest one
        # both hold, the one pinned at each checkpoint (the newest every rank had drained).
        t="$impl: drains lagging differently, nodes lost: the restart agrees from the shared tiers"
        job lag-local
        export ICKPT_SHARED_DIR=$bin/lag-shared
        rm -rf "$ICKPT_SHARED_DIR"
        # Ten global versions, on both shared tiers (finalize waits for the drains).
        mpi_run "$run" 2 "$bin/protocol" run 10 64 >"$bin/lag1.out" 2>&1
        # Resumed with rank 0 draining at 1 KiB/s (a 256 KiB version takes minutes), killed
        # once rank 0 recorded global version 20.
        kill_at_global 20 mpi_run_first_env "$run" 2 ICKPT_DRAIN_BANDWIDTH=1K \
            "$bin/protocol" run 40 64
        lag0=$(newest_global "$ICKPT_SHARED_DIR" 0)
        lag1=$(newest_global "$ICKPT_SHARED_DIR" 1)
        if ! grep -q "protocol: done" "$bin/lag1.out"; then
            fail "$t" "the first run failed" "$bin/lag1.out"
        elif [ "$lag0" -ne 10 ] || [ "$lag1" -le 11 ]; then
            fail "$t" "no lag to test: the shared tiers' newest global versions are $lag0 and $lag1, wanted 10 and above 11" "$killed_out"
        else
            rm -rf "$ICKPT_DIR"
            expect "$t: every rank resumes at global version 10" \
                "protocol: done.*restarted at step 10\$" mpi_run "$run" 2 "$bin/protocol" run 40 64
        fi
    )
    (
        t="$impl: Fortran heat on 2 ranks"
        mpi_run "$run" 2 "$bin/heat_f" $steps $cells >"$bin/ref-f.out" 2>&1
        want=$(checksum "$bin/ref-f.out")
        job heat-f
        resumes "$t: killed at random, resumed, same checksum" $((steps / every)) "$want" \
            mpi_run "$run" 2 "$bin/heat_ickpt_f" $steps $cells $every
    )

    # One rank dies inside the protocol; the restart must agree on one global version. In
    # async mode the agreement runs at the next collective call.
    for c in sync:committed:3:1:2 sync:recorded:3:0:[23] sync:recorded:3:1:[23] \
        async:committed:3:1:2 async:recorded:3:0:[23]; do
        (
            mode=${c%%:*} rest=${c#*:}
            point=${rest%:*} allowed=${rest##*:}
            export ICKPT_MODE=$mode
            job crash-$mode
            crashes "$impl: $mode, rank killed at $point (4 ranks)" "$point" "$allowed"
        )
    done

    (
        t="$impl: after a crash left ranks a version apart, a fresh start without restore"
        job fresh
        # Rank 0 dies once its record of global 3 is durable: it is one record ahead.
        ICKPT_MPI_CRASH=recorded:3:0 mpi_run "$run" 4 "$bin/protocol" run 6 8 >"$bin/crash.out" 2>&1
        if grep -q "protocol: done" "$bin/crash.out"; then
            fail "$t" "the job finished: the crash switch did not fire" "$bin/crash.out"
        else
            expect "$t: the fresh start" "protocol: done" mpi_run "$run" 4 "$bin/protocol" fresh 2 8
            expect "$t: one global version on every rank" "protocol: done.*restarted at step 2\$" \
                mpi_run "$run" 4 "$bin/protocol" run 2 8
        fi

        t="$impl: a rank's store lost: init refused on every rank, nothing discarded"
        rm -rf "$ICKPT_DIR/rank-00001"
        before=$(ls "$ICKPT_DIR/rank-00000" | sort | tr '\n' ' ')
        expect "$t" "protocol: refused: ok" mpi_run "$run" 4 "$bin/protocol" refused
        [ "$(ls "$ICKPT_DIR/rank-00000" | sort | tr '\n' ' ')" = "$before" ] ||
            fail "$t" "rank 0's store changed"
    )

    (
        export ICKPT_MODE=async
        job async
        resumes "$impl: async, killed at random, resumed" 40 protocol \
            mpi_run "$run" 2 "$bin/protocol" run 40 256
    )
    (
        job slow
        resumes "$impl: rank 0 on a slow store (ICKPT_BANDWIDTH=4M), killed at random, resumed" 40 \
            protocol mpi_run_first_env "$run" 2 ICKPT_BANDWIDTH=4M "$bin/protocol" run 40 64
    )
    (
        job fault
        expect "$impl: a store fault on one rank fails the checkpoint on every rank" \
            "protocol: fault: ok \(ICKPT_ERR_NO_SPACE\)" \
            mpi_run_first_env "$run" 2 ICKPT_FAULT=enospc@4096 "$bin/protocol" fault
        job record-fault
        expect "$impl: a record that fails on one rank, after every rank committed, fails it on all" \
            "protocol: fault: ok \(ICKPT_ERR_NO_SPACE\)" \
            mpi_run_first_env "$run" 2 ICKPT_FAULT=record:enospc@0 "$bin/protocol" fault
    )
    (
        job misuse
        expect "$impl: mismatched collective calls" "protocol: misuse: ok" \
            mpi_run "$run" 2 "$bin/protocol" misuse
        refuses "$impl: a restart with another number of ranks is refused" "job of 2 ranks" \
            mpi_run "$run" 4 "$bin/protocol" init
        # Input from files and the environment is checked before it is used.
        printf 'ickpt MPI job, format 1\nranks 2\nmore\n' >"$ICKPT_DIR/ickpt-job"
        refuses "$impl: a job file with anything after its rank count is refused" \
            "is not an ickpt job file" mpi_run "$run" 2 "$bin/protocol" init
        # The core resolves the config (ickpt_config_resolve): a setting ickpt_init would
        # refuse fails init on every rank, with the core's message, before rank 0 makes the
        # job directory.
        job bad-mode
        t="$impl: a bad ICKPT_MODE is refused on every rank before the job directory is made"
        ICKPT_MODE=fast refuses "$t" 'ICKPT_MODE="fast": expected sync or async' \
            mpi_run "$run" 2 "$bin/protocol" init
        if [ -e "$ICKPT_DIR" ]; then
            fail "$t: nothing made" "the job directory $ICKPT_DIR was made"
        fi
        job crash-switch
        ICKPT_MPI_CRASH=committed:-3:1 refuses "$impl: a malformed ICKPT_MPI_CRASH is refused" \
            "ICKPT_MPI_CRASH=committed:-3:1: expected" mpi_run "$run" 2 "$bin/protocol" init
    )
done
passed=$(grep -c '^pass$' "$results")
failed=$(grep -c '^fail$' "$results")
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || exit 1
# All passed: the stores go (about 1 GB), the logs and programs stay.
find "$out" -mindepth 3 -maxdepth 3 -type d -name 'rank-*' -exec rm -rf {} +
rm -rf "${out:?}/tmp"
