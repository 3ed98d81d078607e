#!/usr/bin/env bash
# bench-tiers.sh STAGE OUT: make bench-tiers. What draining to a shared tier costs the
# application: demo/heat.c (64 MiB grid, 200 iterations, a checkpoint every 10) run with a
# local store only (A) and with a local store plus ICKPT_SHARED_DIR (B), in pairs whose order
# alternates, in sync and in async mode. Records heat's own time to its "done" line (compute
# and checkpoints, the drain running beside them) and the process's whole run (ickpt_finalize
# waits for the drain). Writes OUT/tiers.json (the run header, one object per pair) and
# OUT/tiers.csv (medians). Both tiers are on this machine's one disk: the drain competes with
# the commits for it, a worse case than a node-local disk and a parallel file system.
set -euo pipefail
stage=$1; out=$2
reps=${BENCH_TIERS_REPS:-7} iters=200 every=10
. "$(dirname "$0")/bench-start.sh"
heat_bench bench-tiers "$stage" "$out"

# one MODE TIERED REP: run heat once; appends "mode tiered rep seconds wall" to $lines.
one() {
  local mode=$1 tiered=$2 rep=$3 d=$work/run s log t1 t2 secs
  rm -rf "$d" "$work/shared"
  s=()
  [ "$tiered" = 1 ] && s=(env "ICKPT_SHARED_DIR=$work/shared")
  log=$work/heat.log
  t1=$(date +%s%N)
  "${s[@]}" "$work/heat" --dir "$d" --iters $iters --every $every \
    $([ "$mode" = async ] && echo --async) >"$log"
  t2=$(date +%s%N)
  secs=$(sed -n 's/^done .*seconds=\([0-9.]*\).*/\1/p' "$log")
  backend=$(sed -n 's/^tracking backend=\([^ ]*\).*/\1/p' "$log")
  [ -n "$secs" ] && [ -n "$backend" ] ||
    { echo "bench-tiers: heat printed no done or backend line" >&2; exit 1; }
  if [ "$tiered" = 1 ] && [ "$(ls "$work/shared" | grep -c '^v')" -ne "$(ls "$d" | grep -c '^v')" ]; then
    echo "bench-tiers: the shared tier does not hold every version after finalize" >&2; exit 1
  fi
  echo "$mode $tiered $rep $secs $(( (t2 - t1) / 1000000 )) $backend" >>"$lines"
}

for mode in sync async; do
  echo "bench-tiers: $mode, $reps pairs" >&2
  for rep in $(seq "$reps"); do
    if [ $((rep % 2)) -eq 1 ]; then one "$mode" 0 "$rep"; one "$mode" 1 "$rep"
    else one "$mode" 1 "$rep"; one "$mode" 0 "$rep"; fi
  done
done
rm -rf "$work/run" "$work/shared"

python3 - "$lines" "$out" "$started" "$(( $(date +%s) - t0 ))" "$(git -C "$root" rev-parse HEAD)" <<'PY'
import json, statistics, sys, platform, os
lines, out, started, secs, commit = sys.argv[1:6]
rows = [l.split() for l in open(lines)]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
pairs, csv = [], ["mode,local_s,tiered_s,median_ratio,local_wall_ms,tiered_wall_ms"]
for mode in ("sync", "async"):
    a = {int(r[2]): r for r in rows if r[0] == mode and r[1] == "0"}
    b = {int(r[2]): r for r in rows if r[0] == mode and r[1] == "1"}
    ratios = []
    for rep in sorted(a):
        ratio = float(b[rep][3]) / float(a[rep][3])
        ratios.append(ratio)
        pairs.append({"mode": mode, "rep": rep, "local_s": float(a[rep][3]),
                      "tiered_s": float(b[rep][3]), "ratio": round(ratio, 4),
                      "local_wall_ms": int(a[rep][4]), "tiered_wall_ms": int(b[rep][4]),
                      "backend": a[rep][5]})
    med = lambda xs: statistics.median(xs)
    csv.append(f"{mode},{med([float(r[3]) for r in a.values()]):.3f},{med([float(r[3]) for r in b.values()]):.3f},"
               f"{med(ratios):.4f},{med([int(r[4]) for r in a.values()])},{med([int(r[4]) for r in b.values()])}")
doc = {"machine": f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}", "git_commit": commit,
       "started_utc": started, "run_seconds": int(secs), "program": "demo/heat.c, 64 MiB grid, 200 iterations, checkpoint every 10",
       "shared_tier": "a directory on the same disk as the local one",
       "backends": sorted({r[5] for r in rows}), "pairs": pairs}
json.dump(doc, open(os.path.join(out, "tiers.json"), "w"), indent=2)
open(os.path.join(out, "tiers.csv"), "w").write("\n".join(csv) + "\n")
print("\n".join(csv))
PY
