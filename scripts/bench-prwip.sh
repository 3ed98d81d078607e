#!/usr/bin/env bash
# bench-prwip.sh STAGE OUT: make bench-prwip, PRWIP's Figs. 5-6, 8-11 with ickpt's pre-copy,
# on examples/prwip/workloads.c built against STAGE.
#
# For each backend in BENCH_PRWIP_BACKENDS (default: uffd-async mprotect) and each workload
# in BENCH_PRWIP_WORKLOADS (default: bt sp lu cg mg is matrow matcol):
# 1. the step count that takes BENCH_PRWIP_SECONDS (default 60) without ickpt (--plain) is
#    found once (the same steps for every run after, so every run does the same work);
# 2. BENCH_PRWIP_REPS rounds (default 3), each running, in an order that rotates from round
#    to round: the run without ickpt; for each interval in BENCH_PRWIP_INTERVALS (default
#    "5 10" seconds), sync checkpoints with pre-copy off (traditional incremental), blind,
#    prwip and prwip-opt; and at the first interval, the same four with
#    ICKPT_DISCARD_WRITES=1 (nothing written: the software overhead, Fig. 11), and async
#    commits with pre-copy off and prwip-opt (does pre-copy add anything to async?); those six
#    are left out with BENCH_PRWIP_EXTRAS=0. On mprotect, whose faults give the writing
#    function as the pages' context, also PRWIP-opt at the first interval with the region
#    as the context (ICKPT_PRECOPY_CONTEXT=region, what the other backends use); left out
#    with BENCH_PRWIP_REGION=0.
# BENCH_PRWIP_BANDWIDTH (ICKPT_BANDWIDTH's syntax, e.g. 100M; default 0, unlimited) emulates a
# store that slow for every run with ickpt, pre-copy's writes included: the paper's setting,
# where the checkpoint calls are a larger share of the run.
# The store is a directory on this machine's disk ($work/store), each version fsynced as
# always; it is emptied before each run. Writes OUT/prwip.jsonl, one line a run: the
# settings, then the program's --json line. scripts/plot_prwip.py makes the figures, the CSV
# and the table.
set -euo pipefail
stage=$1; out=$2
backends=${BENCH_PRWIP_BACKENDS:-"uffd-async mprotect"}
workloads=${BENCH_PRWIP_WORKLOADS:-"bt sp lu cg mg is matrow matcol"}
seconds=${BENCH_PRWIP_SECONDS:-60}
intervals=${BENCH_PRWIP_INTERVALS:-"5 10"}
reps=${BENCH_PRWIP_REPS:-3}
extras=${BENCH_PRWIP_EXTRAS:-1}
region=${BENCH_PRWIP_REGION:-1}
# The strategies run at each interval (a subset re-measures a change to one of them).
strategies=${BENCH_PRWIP_STRATEGIES:-"off blind prwip prwip-opt"}
bandwidth=${BENCH_PRWIP_BANDWIDTH:-0}
. "$(dirname "$0")/bench-start.sh"
bench_start bench-prwip "$out"
store=$work/store
export PKG_CONFIG_PATH=$stage/lib/pkgconfig
cc -O2 -Wall -Wextra -Werror -o "$work/prwip_workloads" "$root/examples/prwip/workloads.c" \
  $(pkg-config --cflags --libs ickpt) -lm -Wl,-rpath,"$stage/lib"
bin=$work/prwip_workloads
jsonl=$out/prwip.jsonl
: >"$jsonl"
first=${intervals%% *}

# run BACKEND WORKLOAD STEPS REP CONFIG: one run; CONFIG is plain, or
# STRATEGY:INTERVAL:MODE:DISCARD[:CONTEXT] (CONTEXT: ICKPT_PRECOPY_CONTEXT, function when
# left out). Appends {"backend":..,"config":..,"rep":..,"bandwidth":..,"run":{...}}.
run() {
  local backend=$1 w=$2 steps=$3 rep=$4 config=$5 line
  rm -rf "$store"
  if [ "$config" = plain ]; then
    line=$("$bin" "$w" --steps "$steps" --plain --json)
  else
    local s i m d c
    IFS=: read -r s i m d c <<<"$config"
    line=$(env ICKPT_BACKEND="$backend" ICKPT_PRECOPY="$s" ICKPT_MODE="$m" \
      ICKPT_DISCARD_WRITES="$d" ICKPT_CHECKPOINT_INTERVAL="${i}s" \
      ICKPT_PRECOPY_CONTEXT="${c:-function}" ICKPT_BANDWIDTH="$bandwidth" \
      "$bin" "$w" --steps "$steps" --interval "$i" --dir "$store" --json)
  fi
  printf '{"backend":"%s","config":"%s","rep":%s,"bandwidth":"%s","run":%s}\n' \
    "$backend" "$config" "$rep" "$bandwidth" "$line" >>"$jsonl"
}

for backend in $backends; do
  for w in $workloads; do
    # Steps for a run of $seconds without ickpt.
    probe=$("$bin" "$w" --plain --seconds "$seconds" --json)
    steps=$(python3 -c 'import json,sys; print(max(1, json.loads(sys.argv[1])["steps_run"]))' "$probe")
    configs=(plain)
    for i in $intervals; do
      for s in $strategies; do configs+=("$s:$i:sync:0"); done
    done
    if [ "$extras" = 1 ]; then
      for s in off blind prwip prwip-opt; do configs+=("$s:$first:sync:1"); done
      configs+=("off:$first:async:0" "prwip-opt:$first:async:0")
    fi
    if [ "$region" = 1 ] && [ "$backend" = mprotect ]; then
      configs+=("prwip-opt:$first:sync:0:region")
    fi
    n=${#configs[@]}
    for rep in $(seq "$reps"); do
      echo "bench-prwip: $backend $w ($steps steps) round $rep of $reps, $n runs" >&2
      for k in $(seq 0 $((n - 1))); do
        run "$backend" "$w" "$steps" "$rep" "${configs[$(((k + rep * 5) % n))]}"
      done
    done
  done
done
rm -rf "$store"
echo "bench-prwip: $(wc -l <"$jsonl") runs in $(($(date +%s) - t0)) s, started $started" >&2
