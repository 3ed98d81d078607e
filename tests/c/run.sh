#!/usr/bin/env bash
# tests/c/run.sh STAGE: build the C API tests against the ickpt installed in STAGE (through
# pkg-config) and run them, each with a fresh, empty store directory in ICKPT_TEST_DIR.
#
# Conventions:
#   tests/c/*.c             one test program each, built into build/ctests/<name>
#   *_dies_segv.c           must be killed by SIGSEGV after printing the fault marker
#   static_link.c           linked against libickpt.a (pkg-config ickpt-static) instead of
#                           libickpt.so, and again as a fully static program (cc -static with
#                           pkg-config --static ickpt): static_full
#   cxx_header.cpp          C++ compile/link check of ickpt.h and ickpt_coord.h
#   enospc.c                run once per injected store fault (see the run loop)
#   fuse_*.c                store on an ickpt-testfs mount (FUSE fault injection), run once per
#                           set of its options: need root, /dev/fuse and the ickpt-testfs binary
#                           (ICKPT_TESTFS, default target/release/ickpt-testfs: `make testfs`)
#   tmpfs_*.c               store on a small tmpfs the test mounts: need root (mount rights)
#   cffi_readme.py          README's Python example through cffi, by Debian's python3
#   readme_example.c        includes README.md's first C example (extracted below), run as
#                           a killed first run and a restarted second one
# The mount tests FAIL when what they need is missing, unless ICKPT_ALLOW_NO_FUSE=1 (a developer
# machine): then they are reported as SKIP. Mounts a test leaves behind are detached.
# Prints "PASS name" / "FAIL name (reason)" / "SKIP name (reason)" per test and ends with
# "N passed, M failed" (", K skipped" when some were); exits 0 only when nothing failed.
# ICKPT_TEST_BACKEND=b runs every test with ICKPT_BACKEND=b (other ICKPT_* variables from the
# caller are removed).
# ICKPT_TEST_SANITIZE=address,undefined (any -fsanitize= list) builds every test with those
# sanitizers into build/ctests-san and runs them the same way; a sanitizer's report fails the
# test. What cannot run under them says SKIP, with the reason.
set -uo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 STAGE   (an ickpt install prefix, e.g. build/prefix)" >&2
    exit 2
fi
STAGE=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no such directory: $1" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
san=${ICKPT_TEST_SANITIZE:-}
out=$root/build/ctests${san:+-san}${ICKPT_TEST_BACKEND:+-$ICKPT_TEST_BACKEND}
stores=$out/stores

CC=${CC:-cc}
CXX=${CXX:-g++}
CFLAGS_TEST="-O1 -g -Wall -Wextra -Werror -pthread"
san_flags=""
segv_env=()
if [ -n "$san" ]; then
    # Every report fails the test (UBSan's too: it would only print), with a stack trace.
    san_flags="-fsanitize=$san -fno-sanitize-recover=all -fno-omit-frame-pointer"
    CFLAGS_TEST+=" $san_flags"
    # ASan's SIGSEGV handler (handle_segv=1, the default) stays: it is installed before main,
    # so ickpt_init takes it as the application's handler and chains genuine faults to it,
    # which reports them. A *_dies_segv test must die by SIGSEGV, as it would without ickpt,
    # so it runs with handle_segv=0: the default action is then what ickpt chains to, as in a
    # program built without sanitizers. The library's whole-page reads are exempt
    # (asan.supp). LeakSanitizer stays on: the tests free what they allocate, and what the
    # library allocates through malloc is checked at exit too. The caller's options come last.
    export ASAN_OPTIONS="suppressions=$here/asan.supp${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    segv_env=(ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0" UBSAN_OPTIONS="$UBSAN_OPTIONS:handle_segv=0")
fi
TEST_TIMEOUT=${ICKPT_TEST_TIMEOUT:-60}
testfs=${ICKPT_TESTFS:-$root/target/release/ickpt-testfs}

passed=0
failed=0
skipped=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
skip() { echo "SKIP $1 ($2)"; skipped=$((skipped + 1)); }
fail() {
    echo "FAIL $1 ($2)"
    failed=$((failed + 1))
    if [ -n "${3:-}" ] && [ -s "$3" ]; then
        sed -n '1,40p' "$3" | sed 's/^/    | /'
    fi
}

# Mount points at or below $1, deepest first (mountinfo escapes blanks as octal: \040).
mounts_below() {
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
        sort -r | while read -r m; do printf '%b\n' "$m"; done
}
detach_below() {
    local m
    mounts_below "$1" | while read -r m; do umount -l "$m"; done
}

# A run killed outright can leave mounts in the stores; rm cannot go through them.
detach_below "$out"
rm -rf "$out"
mkdir -p "$out" "$stores"
# No core files from the tests that must die by SIGSEGV.
ulimit -c 0

export PKG_CONFIG_PATH="$STAGE/lib/pkgconfig"
if ! pc_cflags=$(pkg-config --cflags ickpt 2>"$out/pkg-config.log") ||
    ! pc_libs=$(pkg-config --libs ickpt 2>>"$out/pkg-config.log") ||
    ! pc_static=$(pkg-config --libs ickpt-static 2>>"$out/pkg-config.log") ||
    ! pc_full_static=$(pkg-config --static --libs ickpt 2>>"$out/pkg-config.log") ||
    ! pc_version=$(pkg-config --modversion ickpt 2>>"$out/pkg-config.log"); then
    fail pkg-config "pkg-config cannot find ickpt and ickpt-static in $PKG_CONFIG_PATH" "$out/pkg-config.log"
    echo "$passed passed, $failed failed"
    exit 1
fi
defs=(-DICKPT_EXPECTED_VERSION="\"$pc_version\"")

# ---- build ---------------------------------------------------------------------------------

# README.md's first example, exactly as printed: the fenced C block of "Using it from C".
awk '/^## Using it from C/ { section = 1; next }
     section && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$root/README.md" >"$out/readme_example.inc"
[ -s "$out/readme_example.inc" ] || fail readme_extract "no C block under \"## Using it from C\" in README.md" ""

# The programs are compiled as many at a time as there are processors (make test builds them
# five times: on 2 cores this halves the 12 s each build took one by one); their results are
# then read in order.
build_jobs=$(nproc 2>/dev/null || echo 1)
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    log=$out/$name.build.log
    if [ "$name" = static_link ]; then
        # shellcheck disable=SC2206
        cmd=($CC $CFLAGS_TEST "${defs[@]}" $pc_cflags -o "$out/$name" "$src" $pc_static)
    else
        # shellcheck disable=SC2206
        cmd=($CC $CFLAGS_TEST "${defs[@]}" -I"$out" $pc_cflags -o "$out/$name" "$src" $pc_libs)
    fi
    printf '%q ' "${cmd[@]}" >"$log"
    echo >>"$log"
    while [ "$(jobs -rp | wc -l)" -ge "$build_jobs" ]; do wait -n; done
    { "${cmd[@]}" >>"$log" 2>&1; echo $? >"$out/$name.build.rc"; } &
done
wait
built=()
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    log=$out/$name.build.log
    rc=$(cat "$out/$name.build.rc" 2>/dev/null || echo "unknown")
    if [ "$rc" != 0 ]; then
        fail "build:$name" "compiler exit status $rc; see ${log#"$root"/}" "$log"
        continue
    fi
    built+=("$name")
done

# static_link.c once more, as a fully static program.
if [ -f "$here/static_link.c" ] && [ -n "$san" ]; then
    skip static_full "the sanitizers' run-times cannot be linked into a fully static program (cc: cannot specify -static with -fsanitize=address)"
elif [ -f "$here/static_link.c" ]; then
    log=$out/static_full.build.log
    # shellcheck disable=SC2086
    if $CC $CFLAGS_TEST "${defs[@]}" -static $pc_cflags -o "$out/static_full" \
        "$here/static_link.c" $pc_full_static >"$log" 2>&1; then
        built+=(static_full)
    else
        fail build:static_full "cc -static with pkg-config --static --libs ickpt failed; see ${log#"$root"/}" "$log"
    fi
fi

# The header must also be valid C++ (extern "C", no C-only constructs).
if [ -f "$here/cxx_header.cpp" ]; then
    log=$out/cxx_header.build.log
    # shellcheck disable=SC2086
    if $CXX -O1 -g -Wall -Wextra -Werror -pedantic $san_flags -o "$out/cxx_header" "$here/cxx_header.cpp" \
        $pc_cflags $pc_libs >"$log" 2>&1; then
        if "$out/cxx_header" >"$out/cxx_header.log" 2>&1; then
            pass cxx_header
        else
            fail cxx_header "the C++ program failed; see ${out#"$root"/}/cxx_header.log" "$out/cxx_header.log"
        fi
    else
        fail cxx_header "g++ cannot compile or link against ickpt.h; see ${log#"$root"/}" "$log"
    fi
fi

# The headers alone must compile as strict C89 (stdint.h aside: C89 has none) and C99.
for std in c89 c99; do
    log=$out/header_$std.build.log
    # shellcheck disable=SC2086
    if printf '%s\n' '#include <ickpt.h>' '#include <ickpt_coord.h>' \
        'int main(void) { ickpt_config cfg; uint64_t g;' \
        '    return ickpt_config_init(&cfg) != ICKPT_OK || ickpt_drained_global(&g) != ICKPT_ERR_NOT_INITIALIZED; }' |
        $CC -std=$std -pedantic-errors -Wall -Wextra -Werror $pc_cflags -x c -o "$out/header_$std" - $pc_libs >"$log" 2>&1; then
        pass header_$std
    else
        fail header_$std "ickpt.h or ickpt_coord.h does not compile as -std=$std -pedantic-errors; see ${log#"$root"/}" "$log"
    fi
done

# ---- run -----------------------------------------------------------------------------------

# run_test NAME BINARY EXPECT [VAR=VALUE...] [-- ARGS...]
#   EXPECT is "exit0", "segv" or "killed" (SIGKILL after printing the fault marker). The test
#   gets a fresh empty ICKPT_TEST_DIR, or with reuse_store=NAME the store that test NAME left;
#   ICKPT_* from the caller's environment are removed so they cannot change the outcome.
reuse_store=
run_test() {
    local name=$1 bin=$2 expect=$3
    shift 3
    local envs=() args=()
    while [ $# -gt 0 ]; do
        if [ "$1" = -- ]; then
            shift
            args=("$@")
            break
        fi
        envs+=("$1")
        shift
    done
    local store=$stores/${reuse_store:-$name} log=$out/$name.log
    if [ -z "$reuse_store" ]; then
        rm -rf "$store"
        mkdir -p "$store"
    fi
    # (The group's 2>/dev/null silences bash's own "Segmentation fault" job report.)
    local backend=()
    [ -n "${ICKPT_TEST_BACKEND:-}" ] && backend=(ICKPT_BACKEND="$ICKPT_TEST_BACKEND")
    {
        env -u ICKPT_DIR -u ICKPT_FAULT -u ICKPT_BACKEND ICKPT_TEST_DIR="$store" "${backend[@]}" "${envs[@]}" \
            timeout -k 5 "$TEST_TIMEOUT" "$bin" "${args[@]}" >"$log" 2>&1
    } 2>/dev/null
    local rc=$?
    local shown=${log#"$root"/}
    case $expect in
        exit0)
            if [ $rc -eq 0 ]; then
                pass "$name"
            elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
                fail "$name" "timed out after ${TEST_TIMEOUT}s; see $shown" "$log"
            elif [ $rc -gt 128 ]; then
                fail "$name" "killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))); see $shown" "$log"
            else
                fail "$name" "exit status $rc; see $shown" "$log"
            fi
            ;;
        segv | killed)
            local sig=SEGV
            [ "$expect" = killed ] && sig=KILL
            if ! grep -q '^ickpt-test: about to fault$' "$log"; then
                fail "$name" "exit status $rc before reaching the fault marker; see $shown" "$log"
            elif [ $rc -eq $((128 + $(kill -l $sig))) ]; then
                pass "$name"
            elif [ $rc -gt 128 ]; then
                fail "$name" "killed by SIG$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128))), expected SIG$sig; see $shown" "$log"
            else
                fail "$name" "exit status $rc, expected death by SIG$sig; see $shown" "$log"
            fi
            ;;
    esac
}

# What the mount tests lack on this machine (the FUSE ones also /dev/fuse).
mount_lacks=()
if [ "$(id -u)" -ne 0 ]; then
    mount_lacks+=("root")
elif ! { mkdir -p "$out/mount-probe" &&
    mount -t tmpfs -o size=64k ickpt-mount-probe "$out/mount-probe" 2>"$out/mount-probe.log" &&
    umount "$out/mount-probe"; }; then
    mount_lacks+=("the right to mount ($(tr -s '\n ' ' ' <"$out/mount-probe.log" | head -c 200))")
fi
fuse_lacks=("${mount_lacks[@]}")
[ -c /dev/fuse ] || fuse_lacks+=("/dev/fuse")

# run_mount_test NAME KIND BINARY [ARGS...]: run_test with the ickpt-testfs binary and the
# staged ickpt command, when this machine allows mounts; then nothing may stay mounted.
run_mount_test() {
    local name=$1 kind=$2 bin=$3
    shift 3
    if [ "$kind" = fuse ] && [ ! -x "$testfs" ]; then
        fail "$name" "$testfs is not built (make testfs)"
        return
    fi
    local lacks="" x
    if [ "$kind" = fuse ]; then
        for x in "${fuse_lacks[@]}"; do lacks+="${lacks:+, }$x"; done
    else
        for x in "${mount_lacks[@]}"; do lacks+="${lacks:+, }$x"; done
    fi
    if [ -n "$lacks" ]; then
        if [ "${ICKPT_ALLOW_NO_FUSE:-0}" = 1 ]; then
            skip "$name" "needs $lacks"
        else
            fail "$name" "needs $lacks; ICKPT_ALLOW_NO_FUSE=1 skips the mount tests (developer machines only)"
        fi
        return
    fi
    run_test "$name" "$bin" exit0 ICKPT_TESTFS="$testfs" ICKPT_TEST_CLI="$STAGE/bin/ickpt" -- "$@"
    local left
    left=$(mounts_below "$stores/$name")
    if [ -n "$left" ]; then
        fail "$name:unmount" "still mounted after the test: ${left//$'\n'/ }"
        detach_below "$stores/$name"
    fi
}

for name in "${built[@]}"; do
    bin=$out/$name
    case $name in
        *_dies_segv)
            run_test "$name" "$bin" segv "${segv_env[@]}"
            ;;
        enospc)
            # The first version file of each ickpt_init fails as injected.
            run_test enospc "$bin" exit0 ICKPT_FAULT=enospc@20000 -- ICKPT_ERR_NO_SPACE
            run_test enospc-eio "$bin" exit0 ICKPT_FAULT=eio@5000 -- ICKPT_ERR_IO
            run_test enospc-commit-eio "$bin" exit0 ICKPT_FAULT=commit-eio -- ICKPT_ERR_IO
            ;;
        fuse_rename)
            run_mount_test fuse-no-rename-flags fuse "$bin" --no-rename-flags
            run_mount_test fuse-no-rename-flags-no-link fuse "$bin" --no-rename-flags --no-link
            run_mount_test fuse-no-rename-flags-link-erofs fuse "$bin" --no-rename-flags --link-erofs
            ;;
        fuse_faults)
            # The test gives each option its byte count (version 1 fits, version 2 does not).
            run_mount_test fuse-eio-write fuse "$bin" ICKPT_ERR_IO --eio-after
            run_mount_test fuse-eio-fsync fuse "$bin" ICKPT_ERR_IO --eio-fsync-after
            run_mount_test fuse-enospc fuse "$bin" ICKPT_ERR_NO_SPACE --enospc-after
            ;;
        fuse_*)
            run_mount_test "$name" fuse "$bin"
            ;;
        tmpfs_*)
            run_mount_test "$name" tmpfs "$bin"
            ;;
        stack_counter)
            # An async ickpt_checkpoint still writes its own stack frames (its result) after
            # the committer starts; when the committer is copying that very page (the one
            # holding the protected counter), the checkpointing thread may not wait for it,
            # and the version is abandoned (ICKPT_ERR_TRACKING), a race in the library. ASan
            # checks each copy of a page a region only partly covers, unwinding and
            # symbolizing to match asan.supp, which stretches that copy from a memcpy to
            # milliseconds: 3 runs in 36 then failed on a loaded 2-core machine (none in 45
            # without the sanitizers). The other C test runs cover it.
            if [ -n "$san" ]; then
                skip stack_counter "the library's race between a checkpointing thread's stack writes and its committer, which the sanitizers' slow page copies make frequent"
            else
                run_test "$name" "$bin" exit0
            fi
            ;;
        readme_example)
            # First run: killed at step 25, after the checkpoints at 10 and 20 steps; the
            # second restores 20 steps and must finish as an uninterrupted run would.
            run_test readme_example-crash "$bin" killed -- crash 25
            reuse_store=readme_example-crash run_test readme_example-resume "$bin" exit0 -- resume 20
            ;;
        static_link | static_full)
            if ! readelf -d "$bin" >"$out/$name.readelf" 2>&1; then
                fail "$name" "readelf -d failed; see ${out#"$root"/}/$name.readelf" "$out/$name.readelf"
            elif grep -q 'NEEDED.*libickpt' "$out/$name.readelf"; then
                fail "$name" "linked against libickpt.so, not libickpt.a" "$out/$name.readelf"
            elif [ $name = static_full ] && grep -q NEEDED "$out/$name.readelf"; then
                fail "$name" "cc -static gave a dynamically linked program" "$out/$name.readelf"
            else
                run_test "$name" "$bin" exit0
            fi
            ;;
        *)
            run_test "$name" "$bin" exit0
            ;;
    esac
done

# Debian's python3: scripts/deps.sh installs cffi for it (a python3 earlier in PATH may lack it).
if [ -n "$san" ]; then
    skip cffi_readme "python3 is not built with the sanitizers, and the test has no C of its own to build with them"
elif /usr/bin/python3 -c 'import cffi' >/dev/null 2>&1; then
    run_test cffi_readme /usr/bin/python3 exit0 -- "$here/cffi_readme.py" "$root/README.md"
elif [ "${ICKPT_ALLOW_NO_CFFI:-0}" = 1 ]; then
    skip cffi_readme "needs python3-cffi for /usr/bin/python3"
else
    fail cffi_readme "needs python3-cffi for /usr/bin/python3 (make deps installs it; ICKPT_ALLOW_NO_CFFI=1 skips this test)" ""
fi

summary="$passed passed, $failed failed"
[ "$skipped" -eq 0 ] || summary+=", $skipped skipped"
echo "$summary"
[ "$failed" -eq 0 ]
