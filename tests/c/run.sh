#!/usr/bin/env bash
# tests/c/run.sh STAGE: build the C API tests against the ickpt installed in STAGE (through
# pkg-config) and run them, each with a fresh, empty store directory in ICKPT_TEST_DIR.
#
# Conventions:
#   tests/c/*.c             one test program each, built into build/ctests/<name>
#   *_dies_segv.c           must be killed by SIGSEGV after printing the fault marker
#   static_link.c           linked against libickpt.a instead of libickpt.so
#   cxx_header.cpp          C++ compile/link check of ickpt.h
#   enospc.c                run once per injected store fault (see run_fault_cases)
#   readme_example.c        includes README.md's first C example (extracted below), run as
#                           a killed first run and a restarted second one
# Prints "PASS name" / "FAIL name (reason)" per test and ends with "N passed, M failed";
# exits 0 only when nothing failed. ICKPT_TEST_BACKEND=b runs every test with ICKPT_BACKEND=b
# (other ICKPT_* variables from the caller are removed).
set -uo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 STAGE   (an ickpt install prefix, e.g. build/prefix)" >&2
    exit 2
fi
STAGE=$(cd "$1" 2>/dev/null && pwd) || { echo "run.sh: no such directory: $1" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$root/build/ctests${ICKPT_TEST_BACKEND:+-$ICKPT_TEST_BACKEND}
stores=$out/stores

CC=${CC:-cc}
CXX=${CXX:-g++}
CFLAGS_TEST="-O1 -g -Wall -Wextra -Werror -pthread"
TEST_TIMEOUT=${ICKPT_TEST_TIMEOUT:-60}

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() {
    echo "FAIL $1 ($2)"
    failed=$((failed + 1))
    if [ -n "${3:-}" ] && [ -s "$3" ]; then
        sed -n '1,40p' "$3" | sed 's/^/    | /'
    fi
}

rm -rf "$out"
mkdir -p "$out" "$stores"
# No core files from the tests that must die by SIGSEGV.
ulimit -c 0

export PKG_CONFIG_PATH="$STAGE/lib/pkgconfig"
if ! pc_cflags=$(pkg-config --cflags ickpt 2>"$out/pkg-config.log") ||
    ! pc_libs=$(pkg-config --libs ickpt 2>>"$out/pkg-config.log") ||
    ! pc_static=$(pkg-config --static --libs ickpt 2>>"$out/pkg-config.log") ||
    ! pc_version=$(pkg-config --modversion ickpt 2>>"$out/pkg-config.log"); then
    fail pkg-config "pkg-config cannot find ickpt in $PKG_CONFIG_PATH" "$out/pkg-config.log"
    echo "$passed passed, $failed failed"
    exit 1
fi
defs=(-DICKPT_EXPECTED_VERSION="\"$pc_version\"")

# The static link line: pkg-config's flags with -lickpt bound to libickpt.a. The rpath and -L
# stay harmless; the check below proves the binary does not load libickpt.so.
static_libs=()
for f in $pc_static; do
    case $f in
        -lickpt) static_libs+=(-Wl,-Bstatic -lickpt -Wl,-Bdynamic) ;;
        *) static_libs+=("$f") ;;
    esac
done

# ---- build ---------------------------------------------------------------------------------

# README.md's first example, exactly as printed: the fenced C block of "Using it from C".
awk '/^## Using it from C/ { section = 1; next }
     section && /^```c$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' "$root/README.md" >"$out/readme_example.inc"
[ -s "$out/readme_example.inc" ] || fail readme_extract "no C block under \"## Using it from C\" in README.md" ""

built=()
for src in "$here"/*.c; do
    name=$(basename "$src" .c)
    log=$out/$name.build.log
    if [ "$name" = static_link ]; then
        # shellcheck disable=SC2206
        cmd=($CC $CFLAGS_TEST "${defs[@]}" $pc_cflags -o "$out/$name" "$src" "${static_libs[@]}")
    else
        # shellcheck disable=SC2206
        cmd=($CC $CFLAGS_TEST "${defs[@]}" -I"$out" $pc_cflags -o "$out/$name" "$src" $pc_libs)
    fi
    printf '%q ' "${cmd[@]}" >"$log"
    echo >>"$log"
    "${cmd[@]}" >>"$log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
        fail "build:$name" "compiler exit status $rc; see ${log#"$root"/}" "$log"
        continue
    fi
    built+=("$name")
done

# The header must also be valid C++ (extern "C", no C-only constructs).
if [ -f "$here/cxx_header.cpp" ]; then
    log=$out/cxx_header.build.log
    # shellcheck disable=SC2086
    if $CXX -O1 -g -Wall -Wextra -Werror -pedantic -o "$out/cxx_header" "$here/cxx_header.cpp" \
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

# The header alone must compile as strict C99.
log=$out/header_c99.build.log
# shellcheck disable=SC2086
if printf '#include <ickpt.h>\nint main(void) { return ickpt_version()[0] == 0; }\n' |
    $CC -std=c99 -pedantic -Wall -Wextra -Werror $pc_cflags -x c -o "$out/header_c99" - $pc_libs >"$log" 2>&1; then
    pass header_c99
else
    fail header_c99 "ickpt.h does not compile as -std=c99 -pedantic; see ${log#"$root"/}" "$log"
fi

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

for name in "${built[@]}"; do
    bin=$out/$name
    case $name in
        *_dies_segv)
            run_test "$name" "$bin" segv
            ;;
        enospc)
            # The first version file of each ickpt_init fails as injected.
            run_test enospc "$bin" exit0 ICKPT_FAULT=enospc@20000 -- ICKPT_ERR_NO_SPACE
            run_test enospc-eio "$bin" exit0 ICKPT_FAULT=eio@5000 -- ICKPT_ERR_IO
            run_test enospc-commit-eio "$bin" exit0 ICKPT_FAULT=commit-eio -- ICKPT_ERR_IO
            ;;
        readme_example)
            # First run: killed at step 25, after the checkpoints at 10 and 20 steps; the
            # second restores 20 steps and must finish as an uninterrupted run would.
            run_test readme_example-crash "$bin" killed -- crash 25
            reuse_store=readme_example-crash run_test readme_example-resume "$bin" exit0 -- resume 20
            ;;
        static_link)
            if readelf -d "$bin" 2>/dev/null | grep -q 'NEEDED.*libickpt\.so'; then
                fail static_link "linked against libickpt.so, not libickpt.a" ""
            else
                run_test "$name" "$bin" exit0
            fi
            ;;
        *)
            run_test "$name" "$bin" exit0
            ;;
    esac
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
