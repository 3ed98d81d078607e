#!/usr/bin/env bash
# The AI-Ckpt benchmark as recorded in docs/benchmarks.md: three settings, CSV + JSON +
# PNG plots under docs/benchmarks/. 25 minutes on the AMD VM, 36 on the Xeon one.
#   raw:     the loop as fast as it goes (one vectorised increment per page), the device as
#            it is; once with one trap per page (the paper), once with fault-around 16.
#   paced:   per-page work 45 (an iteration ~0.25 s) and storage at 256 MiB/s (a commit
#            ~1 s, spanning ~4 iterations): page writes and page flushes at comparable
#            rates, as in the paper; with the copy-on-write sweep of Figure 4.
set -euo pipefail
ickpt=${1:-target/release/ickpt}
out=${2:-docs/benchmarks}
mkdir -p "$out"
run() {
    local name=$1
    shift
    echo "== $name: $ickpt bench aickpt $*" >&2
    "$ickpt" bench aickpt --dir build/bench-aickpt --csv "$out/aickpt-$name.csv" --json "$@" \
        >"$out/aickpt-$name.json"
}
run raw --reps 3
run raw-around16 --reps 3 --fault-around 16
run paced --reps 3 --work 45 --bandwidth 256M --cow-sweep 0,4,16,64,256 \
    --sweep-patterns random,descending
/usr/bin/python3 scripts/plot_aickpt.py "$out/" "$out"/aickpt-raw.csv "$out"/aickpt-raw-around16.csv \
    "$out"/aickpt-paced.csv
