package bench

import (
	"fmt"
	"math/big"
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

// statCPUs returns the fields of each CPU's line of /proc/stat (cpu0,
// cpu1, ...), by CPU number: every CPU online, whatever this process may
// use. nil where it cannot be read.
func statCPUs() map[int][]string {
	b, _ := os.ReadFile("/proc/stat")
	var cpus map[int][]string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if n, err := strconv.Atoi(f[0][3:]); err == nil {
			if cpus == nil {
				cpus = map[int][]string{}
			}
			cpus[n] = f
		}
	}
	return cpus
}

// onlineCPUs returns how many CPUs the machine has online: the load
// average counts the whole machine. 0 where it cannot be read.
func onlineCPUs() int { return len(statCPUs()) }

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

// cpuBusy returns how long the CPUs this process may run on
// (Cpus_allowed of /proc/self/status, a hex mask) have run tasks, whoever
// they were, or had their time stolen by the hypervisor (/proc/stat:
// user, nice, system and steal, in 1/100 s), and how many they are; ok
// is false where they cannot be read.
func cpuBusy() (busy time.Duration, cpus int, ok bool) {
	status, err := os.ReadFile("/proc/self/status")
	_, mask, _ := strings.Cut(string(status), "\nCpus_allowed:")
	mask, _, _ = strings.Cut(mask, "\n")
	allowed, maskOK := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(mask), ",", ""), 16)
	if err != nil || !maskOK {
		return 0, 0, false
	}
	for n, f := range statCPUs() {
		if allowed.Bit(n) == 0 {
			continue
		}
		for _, i := range []int{1, 2, 3, 8} { // user nice system (idle iowait irq softirq) steal
			ticks, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return 0, 0, false
			}
			busy += time.Duration(ticks) * 10 * time.Millisecond
		}
		cpus++
	}
	return busy, cpus, cpus > 0
}

// contention is what else ran beside a measurement, as Starved reads it.
type contention struct {
	load      float64       // the machine's highest 1-minute load average read
	wait      time.Duration // how long this process's threads were ready but waited for a CPU
	waitShare float64       // wait over the time they were ready (on a CPU or waiting)
	others    float64       // the share of this process's CPUs' time that other processes used
}

// loadTrace follows what else ran during a measurement: the schedstat
// times and the CPUs' busy time at its start, and the highest load
// average read.
type loadTrace struct {
	start              time.Time
	run0, wait0, busy0 time.Duration
	sched, busy        bool // run0 and wait0, and busy0, were read
	max                float64
	lastRead           time.Time
}

// loadEvery is how often the sampler reads the load average, which the
// kernel updates every 5 s.
const loadEvery = time.Second

func (l *loadTrace) begin(now time.Time) {
	l.start = now
	l.run0, l.wait0, l.sched = schedTimes()
	l.busy0, _, l.busy = cpuBusy()
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

// end reads the load average once more and returns what else ran since
// begin; the figures it cannot read are 0.
func (l *loadTrace) end() contention {
	now := time.Now()
	l.lastRead = time.Time{}
	l.read(now)
	c := contention{load: l.max}
	run, wait, ok := schedTimes()
	if !ok || !l.sched {
		return c
	}
	run, wait = run-l.run0, wait-l.wait0
	if run > 0 && wait >= 0 {
		c.wait, c.waitShare = wait, float64(wait)/float64(run+wait)
	}
	if busy, cpus, ok := cpuBusy(); ok && l.busy && now.After(l.start) {
		c.others = max(float64(busy-l.busy0-run), 0) / (float64(cpus) * float64(now.Sub(l.start)))
	}
	return c
}

// The thresholds of Starved.
const (
	// starvedLoad: a load average of 1.5 × the machine's CPUs is other
	// processes wanting half as many CPUs as there are, beside a run that
	// keeps every CPU busy.
	starvedLoad = 1.5
	// starvedShare: threads that wait for a CPU a fifth of the time they
	// are ready to run take a quarter longer than on CPUs of their own;
	// other processes that take a fifth of the CPUs' time are why.
	starvedShare = 0.2
)

// Starved says in one sentence why r's run was short of CPU, or returns
// "" when nothing says so. The run was starved when its threads waited
// for a CPU 20 % or more of the time they were ready to run while other
// processes used 20 % or more of the time of the CPUs it runs on, or
// when the machine's 1-minute load average, from the run's start to its
// end, reached 1.5 × its CPUs. The first is what the run's process met
// (its threads alone also wait for each other, so both must hold); the
// second catches other processes that ran all along, the load average
// only averages over a minute.
func (r *Result) Starved() string {
	whose := "its threads (agents and servers)"
	if r.Split != nil {
		whose = "the servers' threads"
	}
	c := contention{load: r.LoadMax, waitShare: r.CPUWaitShare, others: r.OthersCPUShare}
	if s := starved(r.MachineCPUs, c, whose); s != "" {
		return s + "; on a quiet machine its time would be shorter"
	}
	return ""
}

// BoundStarved says in one sentence why h's lower bounds were measured
// short of CPU, by Result.Starved's rule, or returns "".
func (h *Herd) BoundStarved() string {
	c := contention{load: h.BoundLoad, waitShare: h.BoundWaitShare, others: h.BoundOthersShare}
	if s := starved(onlineCPUs(), c, "the threads measuring them"); s != "" {
		return s + "; they are then too long, and every ratio too low"
	}
	return ""
}

// starved is Starved's rule over its inputs: the machine's CPUs (0: not
// read) and c, what else ran beside the threads named by whose.
func starved(cpus int, c contention, whose string) string {
	var why []string
	if c.waitShare >= starvedShare && c.others >= starvedShare {
		why = append(why, fmt.Sprintf("%s waited for a CPU %.0f%% of the time they were ready to run, and other processes took %.0f%% of their CPUs",
			whose, 100*c.waitShare, 100*c.others))
	}
	if cpus > 0 && c.load >= starvedLoad*float64(cpus) {
		s := "s"
		if cpus == 1 {
			s = ""
		}
		why = append(why, fmt.Sprintf("the load average reached %.1f on %d CPU%s", c.load, cpus, s))
	}
	if len(why) == 0 {
		return ""
	}
	return "short of CPU: " + strings.Join(why, "; ")
}
