package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// What else ran: the machine's load average and the time this process's
// threads waited for a CPU, read from Linux's /proc. Elsewhere they read
// as 0, not measured, and Result.Starved says nothing.

// LoadAverage returns the machine's 1, 5 and 15 minute load averages
// (/proc/loadavg); ok is false where they cannot be read.
func LoadAverage() (load [3]float64, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return load, false
	}
	for i := range load {
		if load[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return load, false
		}
	}
	return load, true
}

// onlineCPUs returns how many CPUs the machine has online (the cpuN lines
// of /proc/stat), whatever this process may use: the load average counts
// the whole machine. 0 where it cannot be read.
func onlineCPUs() int {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if len(line) > 3 && strings.HasPrefix(line, "cpu") && line[3] >= '0' && line[3] <= '9' {
			n++
		}
	}
	return n
}

// schedTimes returns how long this process's threads have run on a CPU
// and how long they were ready to run but waited for one: the sums of
// the first two fields of /proc/self/task/*/schedstat. A thread that has
// exited is no longer counted. ok is false where they cannot be read.
func schedTimes() (run, wait time.Duration, ok bool) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, 0, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		f := strings.Fields(string(b))
		if err != nil || len(f) < 2 {
			continue // exited meanwhile
		}
		r, err1 := strconv.ParseInt(f[0], 10, 64)
		w, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		run, wait, ok = run+time.Duration(r), wait+time.Duration(w), true
	}
	return run, wait, ok
}

// loadTrace follows what else ran during a measurement: the schedstat
// times at its start, and the highest load average read.
type loadTrace struct {
	run0, wait0 time.Duration
	sched       bool // run0 and wait0 were read
	max         float64
	lastRead    time.Time
}

// loadEvery is how often the sampler reads the load average, which the
// kernel updates every 5 s.
const loadEvery = time.Second

func (l *loadTrace) begin(now time.Time) {
	l.run0, l.wait0, l.sched = schedTimes()
	l.read(now)
}

// read reads the load average if loadEvery has passed since the last
// read.
func (l *loadTrace) read(now time.Time) {
	if now.Sub(l.lastRead) < loadEvery {
		return
	}
	l.lastRead = now
	if load, ok := LoadAverage(); ok {
		l.max = max(l.max, load[0])
	}
}

// end reads the load average once more and returns the highest read,
// how long this process's threads waited for a CPU since begin, and
// that wait's share of the time they were ready (0, 0 where not read).
func (l *loadTrace) end() (load float64, wait time.Duration, share float64) {
	l.lastRead = time.Time{}
	l.read(time.Now())
	if run, w, ok := schedTimes(); ok && l.sched {
		run, w = run-l.run0, w-l.wait0
		if run > 0 && w >= 0 {
			wait, share = w, float64(w)/float64(run+w)
		}
	}
	return l.max, wait, share
}

// The thresholds of Starved.
const (
	// starvedLoad: a load average of 1.5 × the machine's CPUs is other
	// processes wanting half as many CPUs as there are, beside a run that
	// keeps every CPU busy.
	starvedLoad = 1.5
	// starvedWait: threads that wait for a CPU a fifth of the time they
	// are ready to run take a quarter longer than on CPUs of their own.
	starvedWait = 0.2
)

// Starved says in one sentence why r's run was short of CPU, or returns
// "" when nothing says so. The run was starved when its threads waited
// for a CPU 20 % or more of the time they were ready to run, or when the
// machine's 1-minute load average, from the run's start to its end,
// reached 1.5 × its CPUs. The first is what the run's process met; the
// second catches other processes that ran all along, the one only
// averages over a minute.
func (r *Result) Starved() string {
	whose := "its threads (agents and servers)"
	if r.Split != nil {
		whose = "the servers' threads"
	}
	if s := starved(r.MachineCPUs, r.LoadMax, r.CPUWaitShare, whose); s != "" {
		return s + "; on a quiet machine its time would be shorter"
	}
	return ""
}

// BoundStarved says in one sentence why h's lower bounds were measured
// short of CPU, by Result.Starved's rule, or returns "".
func (h *Herd) BoundStarved() string {
	if s := starved(onlineCPUs(), h.BoundLoad, h.BoundWaitShare, "the threads measuring them"); s != "" {
		return s + "; they are then too long, and every ratio too low"
	}
	return ""
}

// starved is Starved's rule over its inputs: the machine's CPUs (0: not
// read), the highest load average, and the share of their ready time the
// threads named by whose waited for a CPU.
func starved(cpus int, load, waitShare float64, whose string) string {
	var why []string
	if waitShare >= starvedWait {
		why = append(why, fmt.Sprintf("%s waited for a CPU %.0f%% of the time they were ready to run", whose, 100*waitShare))
	}
	if cpus > 0 && load >= starvedLoad*float64(cpus) {
		s := "s"
		if cpus == 1 {
			s = ""
		}
		why = append(why, fmt.Sprintf("the load average reached %.1f on %d CPU%s", load, cpus, s))
	}
	if len(why) == 0 {
		return ""
	}
	return "short of CPU: " + strings.Join(why, ", and ")
}
