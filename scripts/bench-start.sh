# bench-start.sh: sourced by the benchmark scripts (bench-tiers.sh, bench-compress.sh,
# bench-cape.sh), so all start alike.
#
# bench_start NAME OUT: sets root (the repository), work (build/NAME, made fresh), lines (an
# empty file there for the runs' results), started and t0; makes OUT; and unsets every
# ICKPT_* variable but ICKPT_BACKEND, so a run measures the defaults and what the script
# itself sets (a user's ICKPT_COMPRESS or ICKPT_SHARED_DIR would otherwise change both sides
# of every pair).
bench_start() {
  local name=$1 out=$2 v
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  work=$root/build/$name
  rm -rf "$work"
  mkdir -p "$work" "$out"
  for v in $(compgen -e | grep '^ICKPT_' | grep -vx ICKPT_BACKEND); do
    unset "$v"
  done
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ) t0=$(date +%s)
  lines=$work/lines
  : >"$lines"
}

# heat_bench NAME STAGE OUT: bench_start NAME OUT, then builds $work/heat (demo/heat.c)
# against STAGE's libickpt.
heat_bench() {
  local name=$1 stage=$2 out=$3
  bench_start "$name" "$out"
  PKG_CONFIG_PATH="$stage/lib/pkgconfig" cc -O2 -Wall -Wextra -Werror -o "$work/heat" \
    "$root/demo/heat.c" $(PKG_CONFIG_PATH="$stage/lib/pkgconfig" pkg-config --cflags --libs ickpt) \
    -Wl,-rpath,"$stage/lib"
}
