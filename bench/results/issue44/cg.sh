#!/bin/bash
cd /tmp/bs/out
CG=/sys/fs/cgroup/memory/process_api/7fceacd0db387ae6dc222ed8779ab0f0/np2g
log() { echo "$(date +%T) $1 $2 $3 $(cut -d' ' -f1-3 /proc/loadavg)" >> log.txt; }
for r in 1 2 3; do
  if [ $((r%2)) = 1 ]; then order="cg2g none"; else order="none cg2g"; fi
  for m in $order; do
    log cgroup $m $r
    if [ $m = none ]; then /tmp/bs/bench-new -models nodepass -scrypt-memory none -json cgroup/none-$r.json > cgroup/none-$r.txt 2>&1
    else
      echo 0 > $CG/memory.max_usage_in_bytes
      sh -c "echo \$\$ > $CG/cgroup.procs; exec /tmp/bs/bench-new -models nodepass -json cgroup/cg2g-$r.json" > cgroup/cg2g-$r.txt 2>&1
      echo "memory.max_usage_in_bytes $(cat $CG/memory.max_usage_in_bytes) memory.failcnt $(cat $CG/memory.failcnt) oom $(grep oom_kill $CG/memory.oom_control)" >> cgroup/cg2g-$r.txt
    fi
  done
done
log done - -
