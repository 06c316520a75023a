#!/bin/bash
# base (1bfd2f6) against new (HEAD), alternating; 6 rounds.
OUT=/work/hp; B=/work/bin
grep -m1 'model name' /proc/cpuinfo > $OUT/log.txt
for i in 1 2 3 4 5 6; do
  if [ $((i % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for v in $order; do
    echo "$(date +%T) round $i $v load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT/log.txt
    (cd /work/main/verify && $B/verify-$v.test -test.run '^$' -test.bench 'Verify/|LoneMiss|Hasher|CompareHash' -test.benchmem -test.count 1 >> $OUT/verify-$v.txt)
    (cd /work/main/cache && $B/cache-$v.test -test.run '^$' -test.bench . -test.benchmem -test.count 1 >> $OUT/cache-$v.txt)
    (cd /work/main/scrypt && $B/scrypt-$v.test -test.run '^$' -test.bench '^Benchmark(Key|Batch)$' -test.benchmem -test.count 1 >> $OUT/scrypt-$v.txt)
  done
done
echo "$(date +%T) done" >> $OUT/log.txt
