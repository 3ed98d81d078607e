#!/bin/bash
# usage: run.sh ROUNDS SIZE_MIB
cd /tmp/bench-ba
for v in $(env | grep -o '^ICKPT_[A-Za-z0-9_]*'); do unset "$v"; done
ROUNDS=${1:-6}; SIZE=${2:-256}; START=${3:-0}
LOG=/tmp/bench-ba/data/runs.log
for ((i=START;i<ROUNDS;i++)); do
  if ((i%2==0)); then order="before after"; else order="after before"; fi
  for x in $order; do
    BIN=/tmp/bench-ba/$x/target/release/ickpt
    echo "round $i $x start $(date +%T) uptime:$(uptime)" >> $LOG
    ps -eo pcpu,pid,comm --sort=-pcpu | sed -n 2,4p | tr '\n' ';' >> $LOG; echo >> $LOG
    t0=$(date +%s)
    $BIN --json bench incremental --dir /tmp/bench-ba/work-$x --reps 3 --size-mib $SIZE > /tmp/bench-ba/data/$x-$i.json 2> /tmp/bench-ba/data/$x-$i.err
    rc=$?
    echo "round $i $x end $(date +%T) rc=$rc wall=$(( $(date +%s)-t0 ))s" >> $LOG
  done
done
echo ALLDONE >> $LOG
