#!/usr/bin/env bash
# bench-compress.sh STAGE ICKPT OUT: make bench-tiers, compression.
# 1. demo/heat.c (64 MiB grid, 200 iterations, a checkpoint every 10) run with
#    ICKPT_COMPRESS=off and =fast, in pairs whose order alternates, sync and async: heat's
#    own time to its "done" line (compute and checkpoints), its own timing of the checkpoint
#    calls, and the bytes its checkpoints wrote. Writes OUT/compress-heat.json and .csv.
# 2. `ickpt bench compress` on the newest grid of an off run and on random bytes: zstd's
#    ratio and speed per level, and a sync full checkpoint per setting against off. Writes
#    OUT/compress.json and .csv.
set -euo pipefail
stage=$1; ickpt=$2; out=$3
reps=${BENCH_COMPRESS_REPS:-5} iters=200 every=10
. "$(dirname "$0")/bench-start.sh"
heat_bench bench-compress "$stage" "$out"

# one MODE SETTING REP: run heat once into $work/run-SETTING; appends "mode setting rep seconds
# bytes backend ckpt_ms" to $lines (ckpt_ms: the sum of heat's own timing of each checkpoint
# call; bytes: the version files the store keeps at the end) and leaves the store for step 2.
one() {
  local mode=$1 setting=$2 rep=$3 d=$work/run-$2 log=$work/heat.log secs bytes backend ckms
  rm -rf "$d"
  ICKPT_COMPRESS=$setting "$work/heat" --dir "$d" --iters $iters --every $every \
    $([ "$mode" = async ] && echo --async) >"$log"
  secs=$(sed -n 's/^done .*seconds=\([0-9.]*\).*/\1/p' "$log")
  # What the store holds at the end (an async checkpoint line reports no bytes yet).
  bytes=$(cat "$d"/v*.ickpt | wc -c)
  backend=$(sed -n 's/^tracking backend=\([^ ]*\).*/\1/p' "$log")
  ckms=$(sed -n 's/^ckpt .* ms=\([0-9.]*\).*/\1/p' "$log" | awk '{s += $1} END {printf "%.1f", s}')
  [ -n "$secs" ] && [ -n "$backend" ] && [ "$bytes" -gt 0 ] ||
    { echo "bench-compress: heat printed no done, ckpt or backend line" >&2; cat "$log" >&2; exit 1; }
  echo "$mode $setting $rep $secs $bytes $backend $ckms" >>"$lines"
}

for mode in async sync; do
  echo "bench-compress: heat $mode, $reps pairs of off and fast" >&2
  for rep in $(seq "$reps"); do
    if [ $((rep % 2)) -eq 1 ]; then one $mode off "$rep"; one $mode fast "$rep"
    else one $mode fast "$rep"; one $mode off "$rep"; fi
  done
done

python3 - "$lines" "$out" "$started" "$(( $(date +%s) - t0 ))" "$(git -C "$root" rev-parse HEAD)" <<'PY'
import json, statistics, sys, platform, os
lines, out, started, secs, commit = sys.argv[1:6]
rows = [l.split() for l in open(lines)]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
med = statistics.median
doc = {"machine": f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}", "git_commit": commit,
       "started_utc": started, "run_seconds": int(secs),
       "program": "demo/heat.c, 64 MiB grid, 200 iterations, checkpoint every 10", "modes": {}}
csv = ["mode,off_s,fast_s,median_ratio,off_ckpt_ms,fast_ckpt_ms,ckpt_median_ratio,off_bytes,fast_bytes"]
for mode in ("sync", "async"):
    off = {int(r[2]): r for r in rows if r[0] == mode and r[1] == "off"}
    fast = {int(r[2]): r for r in rows if r[0] == mode and r[1] == "fast"}
    pairs = [{"rep": k, "off_s": float(off[k][3]), "fast_s": float(fast[k][3]),
              "ratio": round(float(fast[k][3]) / float(off[k][3]), 4),
              "off_bytes": int(off[k][4]), "fast_bytes": int(fast[k][4]), "backend": off[k][5],
              "off_ckpt_ms": float(off[k][6]), "fast_ckpt_ms": float(fast[k][6]),
              "ckpt_ratio": round(float(fast[k][6]) / float(off[k][6]), 4)}
             for k in sorted(off)]
    ratios = [p["ratio"] for p in pairs]
    ck = [p["ckpt_ratio"] for p in pairs]
    m = {"median_ratio": med(ratios), "ratio_low": min(ratios), "ratio_high": max(ratios),
         "ckpt_median_ratio": med(ck), "ckpt_ratio_low": min(ck), "ckpt_ratio_high": max(ck),
         "off_bytes": med([p["off_bytes"] for p in pairs]), "fast_bytes": med([p["fast_bytes"] for p in pairs]),
         "pairs": pairs}
    doc["modes"][mode] = m
    csv.append(f"{mode},{med([p['off_s'] for p in pairs]):.3f},{med([p['fast_s'] for p in pairs]):.3f},{med(ratios):.4f},"
               f"{med([p['off_ckpt_ms'] for p in pairs]):.1f},{med([p['fast_ckpt_ms'] for p in pairs]):.1f},{med(ck):.4f},"
               f"{m['off_bytes']},{m['fast_bytes']}")
json.dump(doc, open(os.path.join(out, "compress-heat.json"), "w"), indent=2)
open(os.path.join(out, "compress-heat.csv"), "w").write("\n".join(csv) + "\n")
print("\n".join(csv))
PY

"$ickpt" bench compress --dir "$root/build/bench" --grid-store "$work/run-off" --out "$out"
rm -rf "$work"
