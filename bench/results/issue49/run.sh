#!/bin/sh
# R rounds; base first in odd rounds, new first in even ones.
cd /tmp/srv-bs
out=/work/wt/server/bench/results/issue49
for r in $(seq 1 ${R:-6}); do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for w in $order; do
    echo "round $r $w $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out/log.txt
    ./verify-$w.test -test.run '^$' -test.bench 'Verify/path=hit|LoneMiss' -test.cpu 2 -test.benchtime 1s >> $out/verify-$w.txt
    ./sched-$w.test -test.run '^$' -test.bench . -test.benchtime 1s >> $out/sched-$w.txt
    ./scrypt-$w.test -test.run '^$' -test.bench 'KeyAfterHerd' -test.benchtime 6x >> $out/scrypt-$w.txt
    ./scrypt-$w.test -test.run '^$' -test.bench 'Key/logN=15/r=8/p=1/impl=nodepass' -test.benchtime 10x >> $out/scrypt-$w.txt
  done
done
