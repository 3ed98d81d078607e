#!/usr/bin/env bash
# tests/prwip.sh STAGE: PRWIP's workloads (examples/prwip/workloads.c) scaled down
# (--small), with pre-copy on, under whatever ICKPT_BACKEND says (make test runs it once per
# backend). For each workload, with a strategy that rotates over blind, prwip and prwip-opt:
#   - checkpoints every 200 ms while it runs: the final checksum equals the run without ickpt
#     (pre-copy never changes what the program computes), and pages were pre-copied;
#   - stopped (as a crash: _exit, no finalize) half-way, then restarted: the restart ends
#     with the same checksum as the uninterrupted run (the versions pre-copy wrote restore).
# Every run is bounded (ICKPT_TEST_TIMEOUT, default 120 s). Prints PASS/FAIL per workload and
# exits 0 only when all passed.
set -uo pipefail
stage=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$root/build/prwip-tests${ICKPT_BACKEND:+-$ICKPT_BACKEND}
rm -rf "$out"
mkdir -p "$out"
limit=${ICKPT_TEST_TIMEOUT:-120}
export PKG_CONFIG_PATH=$stage/lib/pkgconfig
bin=$out/prwip_workloads
if ! cc -O2 -Wall -Wextra -Werror -o "$bin" "$root/examples/prwip/workloads.c" \
    $(pkg-config --cflags --libs ickpt) -lm -Wl,-rpath,"$stage/lib" 2>"$out/build.log"; then
    echo "FAIL build (see ${out#"$root"/}/build.log)"
    sed -n '1,30p' "$out/build.log"
    exit 1
fi
# The run without ickpt (--plain) is the same whatever the backend, and make test runs this
# script once per backend: its JSON line is kept under the hashes of this program and of the
# staged library (build/prwip-plain/HASH/WORKLOAD.json), so only the first of those runs makes
# it (about 25 s of the three runs' 3 minutes). Another build starts afresh.
plain_dir=$root/build/prwip-plain/$(cat "$bin" "$stage/lib/libickpt.so" | sha256sum | cut -c1-16)
find "$root/build/prwip-plain" -mindepth 1 -maxdepth 1 ! -path "$plain_dir" -exec rm -rf {} + 2>/dev/null
mkdir -p "$plain_dir"
# field NAME JSON: a top-level field of the program's JSON line.
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$1" "$2"; }

strategies=(blind prwip prwip-opt)
failed=0 k=0
for w in bt sp lu cg mg is matrow matcol; do
    s=${strategies[$((k % 3))]} k=$((k + 1))
    store=$out/store-$w
    why=""
    if [ -s "$plain_dir/$w.json" ]; then
        plain=$(cat "$plain_dir/$w.json")
    elif plain=$(timeout "$limit" "$bin" "$w" --small --plain --json); then
        printf '%s\n' "$plain" >"$plain_dir/$w.json"
    else
        why="the run without ickpt failed"
    fi
    if [ -z "$why" ]; then
        run=$(ICKPT_PRECOPY=$s timeout "$limit" "$bin" "$w" --small --interval 0.2 --dir "$store" \
            --json 2>"$out/$w.log") || why="the run with pre-copy $s failed (see $out/$w.log)"
    fi
    if [ -z "$why" ]; then
        want=$(field checksum "$plain")
        steps=$(field steps "$plain")
        [ "$(field checksum "$run")" = "$want" ] || why="checksum $(field checksum "$run") with pre-copy $s, $want without ickpt"
    fi
    if [ -z "$why" ] && [ "$(field precopy_pages "$run")" -eq 0 ]; then
        why="no page was pre-copied ($(field checkpoints "$run") checkpoints)"
    fi
    if [ -z "$why" ]; then
        half=$((steps / 2))
        ICKPT_PRECOPY=$s timeout "$limit" "$bin" "$w" --small --interval 0.2 --every 7 \
            --dir "$store" --stop-after "$half" --json >/dev/null 2>>"$out/$w.log" ||
            why="the run stopped at step $half failed"
    fi
    if [ -z "$why" ]; then
        again=$(ICKPT_PRECOPY=$s timeout "$limit" "$bin" "$w" --small --interval 0.2 \
            --dir "$store" --restart --json 2>>"$out/$w.log") || why="the restart failed"
    fi
    if [ -z "$why" ]; then
        [ "$(field start_step "$again")" -gt 0 ] || why="the restart found no version"
        [ "$(field checksum "$again")" = "$want" ] ||
            why="restarted from step $(field start_step "$again"): checksum $(field checksum "$again"), $want uninterrupted"
    fi
    if [ -z "$why" ]; then
        echo "PASS prwip $w (pre-copy $s)"
    else
        echo "FAIL prwip $w (pre-copy $s): $why"
        failed=$((failed + 1))
    fi
    rm -rf "$store"
done
echo "prwip workloads: $((8 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
