package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestStarved: the rule that says a run was short of CPU, as a function of
// its inputs. The busy case of issue 45: a 2-CPU machine at load 3.8-4.7,
// where nodepass took 11.8 s against 6.1-7.5 s.
func TestStarved(t *testing.T) {
	for _, c := range []struct {
		name string
		cpus int
		c    contention
		want []string // in the sentence; none: ""
	}{
		{"quiet: the run's own load", 2, contention{load: 2.3, waitShare: 0.03, others: 0.01}, nil},
		{"not measured", 0, contention{}, nil},
		{"just under every threshold", 2, contention{load: 2.99, waitShare: 0.199, others: 0.9}, nil},
		{"its threads wait for each other, no one else runs", 2, contention{load: 2.4, waitShare: 0.35, others: 0.02}, nil},
		{"idle by design, others use its CPUs", 2, contention{load: 2.9, waitShare: 0.05, others: 0.6}, nil},
		{"issue 45's busy machine", 2, contention{load: 3.8}, []string{"short of CPU: the load average reached 3.8 on 2 CPUs"}},
		{"load at the threshold", 4, contention{load: 6}, []string{"reached 6.0 on 4 CPUs"}},
		{"one CPU", 1, contention{load: 1.5}, []string{"on 1 CPU"}},
		{"others took its CPUs, load not yet up", 2, contention{load: 2.2, waitShare: 0.45, others: 0.4},
			[]string{"short of CPU: the servers' threads waited for a CPU 45% of the time they were ready to run, and other processes took 40% of their CPUs"}},
		{"both", 2, contention{load: 4.7, waitShare: 0.5, others: 0.5}, []string{"waited for a CPU 50% of the time", "; the load average reached 4.7 on 2 CPUs"}},
		{"load unknown, the rest known", 0, contention{load: 9, waitShare: 0.2, others: 0.2}, []string{"waited for a CPU 20%"}},
	} {
		got := starved(c.cpus, c.c, "the servers' threads")
		if (got == "") != (c.want == nil) {
			t.Errorf("%s: starved(%d, %+v) = %q", c.name, c.cpus, c.c, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
	// The Result's figures go in as the inputs, and a split run names its
	// servers.
	r := &Result{MachineCPUs: 2, LoadMax: 1, CPUWaitShare: 0.3, OthersCPUShare: 0.25}
	if got := r.Starved(); !strings.HasSuffix(got, "its threads (agents and servers) waited for a CPU 30% of the time they were ready to run, "+
		"and other processes took 25% of their CPUs; on a quiet machine its time would be shorter") {
		t.Errorf("Starved() = %q", got)
	}
	r.Split = &Split{}
	if got := r.Starved(); !strings.Contains(got, "the servers' threads waited") {
		t.Errorf("split: Starved() = %q", got)
	}
	// The lower bounds' measurement, by the same rule.
	if got := (&Herd{BoundWaitShare: 0.5, BoundOthersShare: 0.5}).BoundStarved(); !strings.HasSuffix(got,
		"the threads measuring them waited for a CPU 50% of the time they were ready to run, and other processes took 50% of their CPUs; "+
			"they are then too long, and every ratio too low") {
		t.Errorf("BoundStarved() = %q", got)
	}
	if got := (&Herd{BoundWaitShare: 0.5, BoundOthersShare: 0.1}).BoundStarved(); got != "" {
		t.Errorf("BoundStarved() = %q, want nothing", got)
	}
}

// TestLoadReadings: on Linux the load average, the online CPUs and this
// process's scheduler times can be read, and the times move as the
// process runs.
func TestLoadReadings(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the readings are Linux's /proc files")
	}
	if _, ok := LoadAverage(); !ok {
		t.Error("LoadAverage: not read")
	}
	if n := onlineCPUs(); n < 1 {
		t.Errorf("onlineCPUs() = %d", n)
	}
	run0, wait0, ok := schedTimes()
	if !ok {
		t.Fatal("schedTimes: not read")
	}
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	run1, wait1, ok := schedTimes()
	if !ok || run1 <= run0 || wait1 < wait0 {
		t.Errorf("schedTimes: run %v then %v, wait %v then %v", run0, run1, wait0, wait1)
	}
	var l loadTrace
	l.begin(time.Now())
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	c := l.end()
	if !l.sched || !l.busy || c.load < 0 || c.wait < 0 || c.waitShare < 0 || c.waitShare >= 1 || c.others < 0 {
		t.Errorf("loadTrace: schedstat read %v, /proc/stat read %v: %+v", l.sched, l.busy, c)
	}
	if busy, cpus, ok := cpuBusy(); !ok || busy <= 0 || cpus != runtime.NumCPU() {
		t.Errorf("cpuBusy() = %v, %d CPUs, %v; want %d CPUs", busy, cpus, ok, runtime.NumCPU())
	}
}
