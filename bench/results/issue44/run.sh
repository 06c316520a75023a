#!/bin/bash
# interleaved rounds: base = e3f5581 (+BenchmarkLoneMiss), new = int
cd /tmp/bs/out
log() { echo "$(date +%T) $1 $2 $3 $(cut -d' ' -f1-3 /proc/loadavg)" >> log.txt; }
R=${R:-6}
for r in $(seq 1 $R); do
  if [ $((r%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    log hit $v $r; (cd /work/wt/int/verify && /tmp/bs/verify-$v.test -test.run '^$' -test.bench 'Verify/path=hit' -test.benchmem -test.count 1) >> hit-$v.txt
    log cache $v $r; (cd /work/wt/int/cache && /tmp/bs/cache-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1) >> cache-$v.txt
    log lone $v $r; (cd /work/wt/int/verify && /tmp/bs/verify-$v.test -test.run '^$' -test.bench LoneMiss -test.benchmem -test.count 1) >> lone-$v.txt
    log sched $v $r; (cd /work/wt/int/verify/internal/sched && /tmp/bs/sched-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1) >> sched-$v.txt
    log scrypt $v $r; (cd /work/wt/int/scrypt && /tmp/bs/scrypt-$v.test -test.run '^$' -test.bench '^Benchmark(Key|Batch)$' -test.benchmem -test.count 1) >> scrypt-$v.txt
    log verify $v $r; (cd /work/wt/int/verify && /tmp/bs/verify-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1) >> verify-$v.txt
  done
done
mkdir -p herd budget
for r in 1 2 3 4; do
  if [ $((r%2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    log herd $v $r; /tmp/bs/bench-$v -models nodepass -json herd/$v-$r.json > herd/$v-$r.txt 2>&1
  done
done
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="171MiB default"; else order="default 171MiB"; fi
  for m in $order; do
    log budget $m $r
    if [ $m = default ]; then /tmp/bs/bench-new -models nodepass -json budget/$m-$r.json > budget/$m-$r.txt 2>&1
    else /tmp/bs/bench-new -models nodepass -scrypt-memory $m -json budget/$m-$r.json > budget/$m-$r.txt 2>&1; fi
  done
done
log done - -
