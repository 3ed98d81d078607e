#!/usr/bin/env bash
# bench-cape.sh STAGE OUT: make bench-cape, CAPE's Table II with ickpt's sections, on
# examples/cape/markov.c (Fig. 3) built against STAGE:
# 1. for N in BENCH_CAPE_SIZES (default 3320 6640 9960; 13280 too with BENCH_CAPE_BIG=1), 100
#    iterations, BENCH_CAPE_REPS (default 3) rounds, each running the three modes (none, all,
#    loc2) in an order that rotates: time, the location-1 checkpoint's bytes, and each
#    location-2 save's bytes against the pages it would store page by page;
# 2. per N and round, the run stopped after iteration 50 and the restart of it timed, for
#    all (every checkpoint injected) and loc2 (the initialisation redone, location-2 saves
#    injected);
# 3. CAPE's parallel loop (examples/cape/markov_mpi.c, N = BENCH_CAPE_MPI_N, default 6640) on
#    1, 2 and 4 ranks (Open MPI, oversubscribed past the 2 cores), the rank counts rotating.
# The stores are in RAM (/dev/shm), as the paper's were. Writes OUT/cape.json, cape.csv,
# cape-mpi.csv; scripts/plot_cape.py draws cape.png.
set -euo pipefail
stage=$1; out=$2
reps=${BENCH_CAPE_REPS:-3} loop=100
sizes=${BENCH_CAPE_SIZES:-"3320 6640 9960"}
[ "${BENCH_CAPE_BIG:-0}" = 1 ] && sizes="$sizes 13280"
mpin=${BENCH_CAPE_MPI_N:-6640}
. "$(dirname "$0")/bench-start.sh"
bench_start bench-cape "$out"
store=/dev/shm/ickpt-bench-cape
rm -rf "$store"
export PKG_CONFIG_PATH=$stage/lib/pkgconfig
cc -O2 -Wall -Wextra -Werror -o "$work/markov" "$root/examples/cape/markov.c" \
  $(pkg-config --cflags --libs ickpt) -Wl,-rpath,"$stage/lib"
mpicc -O2 -Wall -Wextra -Werror -o "$work/markov_mpi" "$root/examples/cape/markov_mpi.c" \
  $(pkg-config --cflags --libs ickpt-mpi) -Wl,-rpath,"$stage/lib"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The backend the runs use: ICKPT_BACKEND's, else what auto picks on this kernel.
backend=${ICKPT_BACKEND:-$("$stage/bin/ickpt" probe | sed -n 's/^auto picks *//p')}
# field NAME LOG: the number after NAME in LOG, 0 when it is not there.
field() {
  local v
  v=$(sed -n "s/.*$1 \([0-9.]*\).*/\1/p" "$2" | head -1)
  echo "${v:-0}"
}

# run N MODE REP: one full run; appends "run N MODE REP seconds loc1 loc2 loc2page
# ickpt_seconds checksum" (ickpt_seconds: the time inside the section calls).
run() {
  local n=$1 mode=$2 rep=$3 log=$work/run.log
  rm -rf "$store"
  ICKPT_DIR=$store "$work/markov" "$n" $loop "$mode" >"$log"
  echo "run $n $mode $rep $(field ' seconds' "$log") $(field location1_bytes "$log")" \
    "$(field location2_bytes "$log") $(field location2_page_bytes "$log")" \
    "$(field ickpt_seconds "$log") $(sed -n 's/^checksum //p' "$log")" >>"$lines"
}

# restart N MODE REP: stop after iteration 50, then time the restart to the end.
restart() {
  local n=$1 mode=$2 rep=$3 log=$work/restart.log
  rm -rf "$store"
  ICKPT_DIR=$store "$work/markov" "$n" $loop "$mode" 49 >/dev/null
  ICKPT_DIR=$store "$work/markov" "$n" $loop "$mode" >"$log"
  echo "restart $n $mode $rep $(field ' seconds' "$log") $(field resumed "$log")" \
    "$(field ickpt_seconds "$log") $(sed -n 's/^checksum //p' "$log")" >>"$lines"
}

modes=(none all loc2)
for n in $sizes; do
  for rep in $(seq "$reps"); do
    echo "bench-cape: N=$n round $rep of $reps" >&2
    for i in 0 1 2; do run "$n" "${modes[$(((i + rep) % 3))]}" "$rep"; done
    if [ $((rep % 2)) -eq 1 ]; then restart "$n" all "$rep"; restart "$n" loc2 "$rep"
    else restart "$n" loc2 "$rep"; restart "$n" all "$rep"; fi
  done
done
ranks=(1 2 4)
for rep in $(seq "$reps"); do
  echo "bench-cape: CAPE loop N=$mpin round $rep of $reps" >&2
  for i in 0 1 2; do
    np=${ranks[$(((i + rep) % 3))]}
    rm -rf "$store"
    ICKPT_DIR=$store timeout 600 mpirun --oversubscribe -np "$np" "$work/markov_mpi" "$mpin" $loop \
      >"$work/mpi.log"
    echo "mpi $mpin $np $rep $(field loop_seconds "$work/mpi.log") $(field ' seconds' "$work/mpi.log")" \
      "$(sed -n 's/^checksum //p' "$work/mpi.log")" >>"$lines"
  done
done
rm -rf "$store"

python3 - "$lines" "$out" "$started" "$(( $(date +%s) - t0 ))" "$(git -C "$root" rev-parse HEAD)" "$backend" <<'PY'
import json, statistics, sys, platform, os
lines, out, started, secs, commit, backend = sys.argv[1:7]
rows = [l.split() for l in open(lines)]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
med = statistics.median
doc = {"machine": f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}", "git_commit": commit,
       "started_utc": started, "run_seconds": int(secs), "backend": backend or "auto",
       "program": "examples/cape/markov.c (the CAPE paper's Fig. 3), 100 iterations, stores in /dev/shm",
       "sizes": {}, "cape": {}}
csv = ["N,loc1_bytes,loc2_bytes,loc2_page_bytes,none_s,all_s,loc2_s,all_ratio,loc2_ratio,loc2_ratio_low,loc2_ratio_high,"
       "all_ickpt_s,loc2_ickpt_s,all_ickpt_pct,loc2_ickpt_pct,restart_all_s,restart_loc2_s"]
for n in sorted({int(r[1]) for r in rows if r[0] == "run"}):
    runs = [r for r in rows if r[0] == "run" and int(r[1]) == n]
    by = lambda mode: {int(r[3]): r for r in runs if r[2] == mode}
    none, all_, loc2 = by("none"), by("all"), by("loc2")
    reps = sorted(none)
    t = lambda d: [float(d[k][4]) for k in reps]
    ra = [float(all_[k][4]) / float(none[k][4]) for k in reps]
    r2 = [float(loc2[k][4]) / float(none[k][4]) for k in reps]
    rs = [r for r in rows if r[0] == "restart" and int(r[1]) == n]
    rt = lambda mode: med([float(r[4]) for r in rs if r[2] == mode])
    if len({r[-1] for r in runs + rs}) != 1:
        sys.exit(f"bench-cape: N={n}: the runs' checksums differ: {sorted({r[-1] for r in runs + rs})}")
    s = {"loc1_bytes": med([float(all_[k][5]) for k in reps]),
         "loc2_bytes": med([float(loc2[k][6]) for k in reps]),
         "loc2_page_bytes": med([float(loc2[k][7]) for k in reps]),
         "none_s": t(none), "all_s": t(all_), "loc2_s": t(loc2),
         "all_ratio": med(ra), "loc2_ratio": med(r2), "loc2_ratios": r2, "all_ratios": ra,
         # The section calls' own time against the run without checkpoints (same round).
         "all_ickpt_s": med([float(all_[k][8]) for k in reps]),
         "loc2_ickpt_s": med([float(loc2[k][8]) for k in reps]),
         "all_ickpt_pct": med([100 * float(all_[k][8]) / float(none[k][4]) for k in reps]),
         "loc2_ickpt_pct": med([100 * float(loc2[k][8]) / float(none[k][4]) for k in reps]),
         "restart_all_s": rt("all"), "restart_loc2_s": rt("loc2"),
         "restart_resumed": sorted({r[5] for r in rs})}
    doc["sizes"][n] = s
    csv.append(f"{n},{s['loc1_bytes']:.0f},{s['loc2_bytes']:.0f},{s['loc2_page_bytes']:.0f},{med(s['none_s']):.2f},"
               f"{med(s['all_s']):.2f},{med(s['loc2_s']):.2f},{s['all_ratio']:.4f},{s['loc2_ratio']:.4f},"
               f"{min(r2):.4f},{max(r2):.4f},{s['all_ickpt_s']:.3f},{s['loc2_ickpt_s']:.3f},"
               f"{s['all_ickpt_pct']:.2f},{s['loc2_ickpt_pct']:.3f},{s['restart_all_s']:.2f},{s['restart_loc2_s']:.2f}")
mrows = [r for r in rows if r[0] == "mpi"]
mcsv = ["N,ranks,loop_s,speedup,speedup_low,speedup_high"]
for np_ in sorted({int(r[2]) for r in mrows}):
    one = {int(r[3]): float(r[4]) for r in mrows if r[2] == "1"}
    this = {int(r[3]): float(r[4]) for r in mrows if int(r[2]) == np_}
    sp = [one[k] / this[k] for k in sorted(this)]
    doc["cape"][np_] = {"loop_s": sorted(this.values()), "speedup": med(sp), "speedups": sp}
    mcsv.append(f"{mrows[0][1]},{np_},{med(this.values()):.3f},{med(sp):.3f},{min(sp):.3f},{max(sp):.3f}")
checks_mpi = {r[-1] for r in mrows}
doc["checksums_checked"] = "every run, restart and CAPE run of a size printed the same checksum"
doc["cape_checksums"] = sorted(checks_mpi)
json.dump(doc, open(os.path.join(out, "cape.json"), "w"), indent=2)
open(os.path.join(out, "cape.csv"), "w").write("\n".join(csv) + "\n")
open(os.path.join(out, "cape-mpi.csv"), "w").write("\n".join(mcsv) + "\n")
print("\n".join(csv)); print("\n".join(mcsv))
if len(checks_mpi) != 1:
    sys.exit(f"bench-cape: the CAPE runs disagree: {checks_mpi}")
PY
