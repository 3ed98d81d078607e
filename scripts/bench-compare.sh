#!/usr/bin/env bash
# bench-compare.sh OLD NEW OUT REPS: `ickpt bench incremental` of two builds, interleaved
# (OLD, NEW, then NEW, OLD, ...), each in a work directory of its own; one JSON per run in
# OUT, named old-N.json / new-N.json. For before/after figures in docs/benchmarks.md.
set -euo pipefail
old=$1; new=$2; out=$3; reps=${4:-3}
mkdir -p "$out"
run() { # run WHICH BIN N
    "$2" bench incremental --size-mib 256 --reps 5 --json --dir "build/bench-compare-$1" >"$out/$1-$3.json"
    echo "$1 run $3 done"
}
for n in $(seq 1 "$reps"); do
    if [ $((n % 2)) -eq 1 ]; then run old "$old" "$n"; run new "$new" "$n"
    else run new "$new" "$n"; run old "$old" "$n"; fi
done
