#!/bin/bash
# Follow-up: the first cold restore. Three binaries, interleaved, order rotated per round:
#   before = 5659f9d (library and bench with the third, writing-thread engine)
#   mixed  = 5659f9d library + the after bench (incremental.rs of after: no third engine)
#   after  = main HEAD (library and bench without the third engine)
# usage: run.sh ROUNDS [START] [STOP_EPOCH]
cd /tmp/bench-ba/followup
for v in $(env | grep -o '^ICKPT_[A-Za-z0-9_]*'); do unset "$v"; done
ROUNDS=${1:-6}; START=${2:-0}; STOP=${3:-0}
LOG=/tmp/bench-ba/followup/runs.log
PERMS=("before mixed after" "after before mixed" "mixed after before" "before after mixed" "mixed before after" "after mixed before")
for ((i=START;i<ROUNDS;i++)); do
  if (( STOP > 0 && i >= 6 && $(date +%s) > STOP )); then echo "stopped before round $i (time)" >> $LOG; break; fi
  for x in ${PERMS[$((i%6))]}; do
    case $x in mixed) D=mixed;; *) D=${x}2;; esac; BIN=/tmp/bench-ba/$D/target/release/ickpt; [ -x $BIN ] || { echo "no $BIN" >> $LOG; exit 2; }
    echo "round $i $x start $(date +%T) uptime:$(uptime)" >> $LOG
    ps -eo pcpu,pid,comm --sort=-pcpu | sed -n 2,4p | tr '\n' ';' >> $LOG; echo >> $LOG
    grep -E '^(MemFree|Cached|Dirty):' /proc/meminfo | tr -s ' ' | tr '\n' ';' >> $LOG; echo >> $LOG
    t0=$(date +%s)
    $BIN --json bench incremental --dir /tmp/bench-ba/work-$x --reps 3 --size-mib 256 > $x-$i.json 2> $x-$i.err
    rc=$?
    echo "round $i $x end $(date +%T) rc=$rc wall=$(( $(date +%s)-t0 ))s" >> $LOG
  done
done
echo ALLDONE >> $LOG
