#!/usr/bin/env bash
# bench-transparent.sh STAGE OUT: make bench-transparent. Whole-process checkpoints of an
# unmodified program (examples/transparent/dirty.c) by `ickpt run` (sync; async once it is
# available), by CRIU 4.1.1 (scripts/criu.sh builds it once) and by the same program using
# the API against STAGE's libickpt (sync and async): the program stopped, the version's
# size, restart cold and warm, at BENCH_TRANSPARENT_MIBS (default 256 and 4096 MiB) with
# BENCH_TRANSPARENT_PERCENTS (1 10 50) of the pages rewritten between checkpoints,
# BENCH_TRANSPARENT_REPS (5) paired, interleaved repetitions (scripts/bench-transparent.py).
# Writes OUT/transparent.{json,csv} and OUT/summary.md; scripts/plot_transparent.py draws
# OUT/transparent.png. Root only (CRIU; dropping the page cache). About 13 minutes on the
# 2-core Xeon VM.
set -euo pipefail
stage=$(cd "$1" && pwd); out=$2
mibs=${BENCH_TRANSPARENT_MIBS:-"256 4096"}
percents=${BENCH_TRANSPARENT_PERCENTS:-"1 10 50"}
reps=${BENCH_TRANSPARENT_REPS:-5}
if [ "$(id -u)" -ne 0 ]; then
  echo "bench-transparent: run as root: CRIU needs it, and so do cold restarts (drop_caches)" >&2
  exit 1
fi
. "$(dirname "$0")/bench-start.sh"
bench_start bench-transparent "$out"
criu=$("$root/scripts/criu.sh")
cc -O2 -Wall -Wextra -Werror -o "$work/dirty" "$root/examples/transparent/dirty.c"
PKG_CONFIG_PATH="$stage/lib/pkgconfig" cc -O2 -Wall -Wextra -Werror -DDIRTY_API \
  -o "$work/dirty_api" "$root/examples/transparent/dirty.c" \
  $(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --cflags --libs ickpt) -Wl,-rpath,"$stage/lib"
ickpt=$stage/bin/ickpt
# What the header records: the machine, the backend auto picks (ickpt run always uses
# uffd-async), CRIU's version and what its checks say on this kernel.
machine="$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB, Linux $(uname -r)"
backend=$("$ickpt" probe | sed -n 's/^auto picks *//p')
criu_version=$("$criu" --version | sed -n 's/^Version: //p')
criu_check=$("$criu" check 2>&1 | tail -n 1 || true)
dirty_track=$("$criu" check --feature mem_dirty_track 2>&1 | tail -n 1) && dirty_rc=0 || dirty_rc=$?
commit=$(git -C "$root" describe --always --dirty --abbrev=40 2>/dev/null || echo unknown)
filesystem=$(df -T "$work" | awk 'NR == 2 {print $2 " on " $1}')
header=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
  machine "$machine" backend "$backend" git_commit "$commit" criu "$criu_version" \
  criu_check "$criu_check" criu_mem_dirty_track "$dirty_track (exit $dirty_rc)" \
  store "$work ($filesystem)")
echo "bench-transparent: $machine; auto picks $backend; CRIU $criu_version: $criu_check;" \
  "mem_dirty_track: $dirty_track (exit $dirty_rc)" >&2
/usr/bin/python3 "$root/scripts/bench-transparent.py" --ickpt "$ickpt" --dirty "$work/dirty" \
  --dirty-api "$work/dirty_api" --criu "$criu" --work "$work" --out "$out" \
  --mibs "${mibs// /,}" --percents "${percents// /,}" --reps "$reps" --header "$header" \
  | tee "$out/summary.md"
