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
		name      string
		cpus      int
		load      float64
		waitShare float64
		want      []string // in the sentence; none: ""
	}{
		{"quiet: the run's own load", 2, 2.3, 0.03, nil},
		{"not measured", 0, 0, 0, nil},
		{"just under both", 2, 2.99, 0.199, nil},
		{"issue 45's busy machine", 2, 3.8, 0, []string{"short of CPU: the load average reached 3.8 on 2 CPUs"}},
		{"load at the threshold", 4, 6, 0, []string{"reached 6.0 on 4 CPUs"}},
		{"one CPU", 1, 1.5, 0, []string{"on 1 CPU"}},
		{"waited, load not yet up", 2, 2.2, 0.45, []string{"the servers' threads waited for a CPU 45% of the time they were ready to run"}},
		{"both", 2, 4.7, 0.5, []string{"waited for a CPU 50% of the time", ", and the load average reached 4.7 on 2 CPUs"}},
		{"load unknown, wait known", 0, 9, 0.2, []string{"waited for a CPU 20%"}},
	} {
		got := starved(c.cpus, c.load, c.waitShare, "the servers' threads")
		if (got == "") != (c.want == nil) {
			t.Errorf("%s: starved(%d, %v, %v) = %q", c.name, c.cpus, c.load, c.waitShare, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", c.name, got, w)
			}
		}
	}
	// The Result's figures go in as the inputs, and a split run names its
	// servers.
	r := &Result{MachineCPUs: 2, LoadMax: 1, CPUWaitShare: 0.3}
	if got := r.Starved(); !strings.HasSuffix(got, "its threads (agents and servers) waited for a CPU 30% of the time they were ready to run; on a quiet machine its time would be shorter") {
		t.Errorf("Starved() = %q", got)
	}
	r.Split = &Split{}
	if got := r.Starved(); !strings.Contains(got, "the servers' threads waited") {
		t.Errorf("split: Starved() = %q", got)
	}
	// The lower bounds' measurement, by the same rule.
	if got := (&Herd{BoundWaitShare: 0.5}).BoundStarved(); !strings.HasSuffix(got, "the threads measuring them waited for a CPU 50% of the time they were ready to run; they are then too long, and every ratio too low") {
		t.Errorf("BoundStarved() = %q", got)
	}
	if got := (&Herd{BoundWaitShare: 0.1}).BoundStarved(); got != "" {
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
	load, wait, share := l.end()
	if !l.sched || load < 0 || wait < 0 || share < 0 || share >= 1 {
		t.Errorf("loadTrace: schedstat read %v, load %v, wait %v (share %v)", l.sched, load, wait, share)
	}
}
