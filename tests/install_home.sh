#!/usr/bin/env bash
# tests/install_home.sh: `make install` run with a HOME of its own (as batch jobs and
# containers run it) finds the Rust toolchain the set-up installed in the user's own home,
# installs, and a program builds and runs against the installed library through pkg-config;
# the shared libraries have their SONAMEs and links, and libickpt_mpi no test switch.
# Exits 0 on success; prints what failed otherwise.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$root/build/install-home
rm -rf "$work"
mkdir -p "$work/home"
log=$work/make.log
# The environment a job gets: another HOME, and none of rustup's variables. The build goes to
# a target directory of its own, kept between runs: in target/ it would replace the tests'
# libickpt.so (a cdylib's file name carries no hash), and the next `make test` would compile
# the library and every test again (minutes), then this build once more.
if ! env -u RUSTUP_HOME -u CARGO_HOME -u RUSTUP_TOOLCHAIN HOME="$work/home" \
    CARGO_TARGET_DIR="$root/target/install-home" \
    timeout -k 10 900 make -C "$root" install PREFIX="$work/prefix" >"$log" 2>&1; then
    echo "FAIL install-home: make install with HOME=$work/home failed; its output:"
    tail -n 20 "$log" | sed 's/^/    | /'
    exit 1
fi
cat >"$work/app.c" <<'C'
#include <ickpt.h>
#include <stdio.h>
int main(void) {
    ickpt_config cfg;
    if (ickpt_config_init(&cfg) != ICKPT_OK)
        return 1;
    printf("linked %s\n", ickpt_result_name(ICKPT_OK));
    return 0;
}
C
export PKG_CONFIG_PATH=$work/prefix/lib/pkgconfig
# shellcheck disable=SC2046
if ! cc -Wall -Werror "$work/app.c" -o "$work/app" $(pkg-config --cflags --libs ickpt) >>"$log" 2>&1 ||
    ! "$work/app" | grep -qx 'linked ICKPT_OK'; then
    echo "FAIL install-home: a program did not build or run against $work/prefix; see $log"
    exit 1
fi
# What `make install` ships carries none of the test-only code (the `testing` feature: store
# fault injection, the power-loss file system, the fuzz targets, the first-write pauses). The
# tests' stage is built with it: finding that code there shows the check can fail.
test_only() {
    local n
    n=$(nm -C "$1" 2>/dev/null |
        grep -cE 'ickpt::(store::(crash_fs|faulty|discard)|fuzzing|track::protocol::test_pause)::')
    strings "$1" | grep -qE 'ICKPT_DISCARD_WRITES|fault injection for tests' && n=$((n + 1))
    echo "$n"
}
for f in "$work/prefix/lib/libickpt.so" "$work/prefix/lib/ickpt/libickpt_run.so" "$work/prefix/bin/ickpt"; do
    if [ "$(test_only "$f")" != 0 ]; then
        echo "FAIL install-home: $f carries test-only code (built with the testing feature)"
        exit 1
    fi
done
stage_lib=$root/build/prefix/lib/libickpt.so
if [ ! -e "$stage_lib" ] || [ "$(test_only "$stage_lib")" = 0 ]; then
    echo "FAIL install-home: the tests' stage ($stage_lib, make stage) is missing or the check finds no test-only code in it"
    exit 1
fi
# Each shared library names itself by its ABI (SONAME libNAME.so.MAJOR), is installed as
# libNAME.so.VERSION with the links libNAME.so.MAJOR and libNAME.so, and the program records
# the SONAME, not the development link, so it keeps loading the library of its ABI.
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)
soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'; }
for lib in libickpt libickpt_mpi; do
    so=$work/prefix/lib/$lib.so
    want=$lib.so.${version%%.*}
    if [ "$(soname_of "$so.$version")" != "$want" ] ||
        [ "$(readlink "$so")" != "$want" ] || [ "$(readlink "$so.${version%%.*}")" != "$lib.so.$version" ]; then
        echo "FAIL install-home: $lib: SONAME '$(soname_of "$so.$version")' (want $want), links $(readlink "$so") and $(readlink "$so.${version%%.*}")"
        exit 1
    fi
done
if ! readelf -d "$work/app" | grep -q "NEEDED.*\[libickpt.so.${version%%.*}\]"; then
    echo "FAIL install-home: the program does not record libickpt.so.${version%%.*}:"
    readelf -d "$work/app" | grep NEEDED | sed 's/^/    | /'
    exit 1
fi
# The MPI library users get carries no test switch and reads no environment variable.
if strings -a "$work/prefix/lib/libickpt_mpi.so" | grep -q ICKPT_MPI_CRASH ||
    nm -D --undefined-only "$work/prefix/lib/libickpt_mpi.so" | grep -qwE 'getenv|secure_getenv'; then
    echo "FAIL install-home: the installed libickpt_mpi.so has the test switch ICKPT_MPI_CRASH or calls getenv"
    exit 1
fi
echo "PASS install-home"
