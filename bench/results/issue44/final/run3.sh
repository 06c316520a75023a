#!/bin/bash
cd /tmp/bs/out3
log() { echo "$(date +%T) $1 $2 $3 $(cut -d' ' -f1-3 /proc/loadavg)" >> log.txt; }
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="base final"; else order="final base"; fi
  for v in $order; do
    log herd $v $r; /tmp/bs/bench-$v -models nodepass -json herd/$v-$r.json > herd/$v-$r.txt 2>&1
  done
done
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="171MiB none"; else order="none 171MiB"; fi
  for m in $order; do
    log budget $m $r; /tmp/bs/bench-final -models nodepass -scrypt-memory $m -json budget/$m-$r.json > budget/$m-$r.txt 2>&1
  done
done
log done - -
