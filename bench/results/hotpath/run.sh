#!/bin/bash
# Hot path, base (d6fdf27) against new, alternating; ROUNDS rounds.
# Binaries in /work/bin/{verify,cache,sched,scrypt}-{base,new}.test
set -u
R=${ROUNDS:-6}
OUT=${OUT:-/work/hot/out}
mkdir -p $OUT
B=/work/bin
log() { echo "$(date +%T) $* load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt; }
grep -m1 'model name' /proc/cpuinfo > $OUT/log.txt
for i in $(seq $R); do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    log "round $i $v"
    (cd /work/wt/int/verify && $B/verify-$v.test -test.run '^$' -test.bench 'Verify/|LoneMiss|Hasher|CompareHash' -test.benchmem -test.count 1 >> $OUT/verify-$v.txt)
    (cd /work/wt/int/cache && $B/cache-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1 >> $OUT/cache-$v.txt)
    (cd /work/wt/int/verify/internal/sched && $B/sched-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1 >> $OUT/sched-$v.txt)
    (cd /work/wt/int/scrypt && $B/scrypt-$v.test -test.run '^$' -test.bench '^Benchmark(Key|Batch)$' -test.benchmem -test.count 1 >> $OUT/scrypt-$v.txt)
  done
done
log done
