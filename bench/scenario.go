package bench

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Mode says how agents reach the servers.
type Mode string

// Modes.
const (
	// ModeInproc calls each model from the agents' goroutines, through
	// the in-flight cap and status mapping of the HTTP handler.
	ModeInproc Mode = "inproc"
	// ModeHTTP serves each model behind httpauth on a real HTTPS server
	// on 127.0.0.1; the agents' clients disable keep-alives, as k3s's
	// do, so every request is a new TLS connection.
	ModeHTTP Mode = "http"
)

// LB is a k3s agent's load-balancing policy over several servers. Agent
// i starts on server i mod Servers.
type LB string

// Load-balancing policies.
const (
	// LBSticky moves to the next server only when a connection fails, as
	// the k3s agent's load balancer does.
	LBSticky LB = "sticky"
	// LBFailover also moves on after a client timeout, a 429 or a 503.
	LBFailover LB = "failover"
)

// Defaults for Scenario fields left zero.
const (
	DefaultNodes         = 320
	DefaultLogN          = 15
	DefaultClientTimeout = 10 * time.Second
	DefaultDeadline      = 2 * time.Minute
	DefaultMaxHeap       = 4 << 30
	DefaultSampleEvery   = 5 * time.Millisecond
	DefaultCAAge         = 3 * 365 * 24 * time.Hour // a cluster made three years ago
	DefaultStoreSpike    = 200 * time.Millisecond   // a slow read from a loaded API server
)

// Scenario is one herd: Nodes agents with stored hashes, all rebooted at
// once, asking Servers servers of one model to verify their passwords.
// A zero field means its default.
type Scenario struct {
	Nodes int // agents; default 320
	// LogN is the scrypt cost of the stored hashes and of those a model
	// makes for a node it does not know. Default 15, k3s's.
	LogN int
	// ClientTimeout bounds each agent request. Default 10 s, k3s's.
	ClientTimeout time.Duration
	// Agent is the agents' kind. Default JitterPolicy 5-10 s, k3s's.
	Agent Policy
	// Servers share the store, each its own model instance. Default 1.
	Servers int
	// LB is the k3s agents' policy over several servers (ClientPolicy
	// agents fail over as agent.Client does). Default LBSticky.
	LB LB
	// Hung is how many servers (the first) complete TLS and never
	// answer, as the incident's did. Needs ModeHTTP.
	Hung int
	// Known, when positive, is how many servers (the first) each agent
	// remembers: a k3s agent i starts on server i mod Known, a
	// ClientPolicy agent also knows its configured server, a healthy one.
	Known int
	// ValidCerts starts every agent with the certificates an earlier join
	// left on disk, issued at the start as the servers issue them. Needs
	// ModeHTTP.
	ValidCerts bool
	// CAAge is the age of the servers' CA (k3s makes its CAs, valid ten
	// years, with the cluster). Default DefaultCAAge; at most 9 years.
	CAAge time.Duration
	// CANotBefore has the servers date every certificate from the CA's
	// NotBefore, as k3s and RKE2 did before dynamiclistener's
	// CalculateNotBefore. By default NotBefore is max(now - 1 h, the
	// CA's), as they do today. Either way it is valid a year from issue.
	CANotBefore bool
	Mode        Mode // default ModeInproc
	// Deadline bounds one model's run. Default 2 min.
	Deadline time.Duration
	// MaxHeap stops a run whose heap in use (live objects and garbage not
	// swept yet, the whole process) passes it. Default 4 GiB.
	MaxHeap uint64
	// TimeScale multiplies every duration of the scenario and of the
	// models. With 2^(LogN-15) a small herd keeps the proportions of the
	// real one. 0 means 1.
	TimeScale float64
	Seed      uint64 // of the agents' random delays
	// SampleEvery is how often the heap is sampled. Default 5 ms.
	SampleEvery time.Duration
	// BoundSample, when positive, makes Run estimate the lower bound from
	// that many verifications right before the run, under the run's own
	// load (Result.LocalBound).
	BoundSample int
	// Progress, if not nil, is called about every 100 ms during a run
	// and once at its end.
	Progress func(Progress)
	// NoDrain makes Run return as soon as its figures are taken, without
	// waiting for agents and server work to wind down: for a process that
	// exits right after.
	NoDrain bool
	// Reboot says what restarted before the measured herd (reboot.go).
	Reboot Reboot
	// NoDigestKey runs nodepass without remembered verification. By
	// default its servers share a DigestKey made for the run.
	NoDigestKey bool
	// ScryptMemory is each nodepass server's verify.Options.ScryptMemory:
	// 0 its default, negative no budget.
	ScryptMemory int64

	// Adversity (attack.go, faults.go): none by default.

	// Attackers send wrong passwords for real node names, each as fast
	// as answers come, picking names as AttackNames says (default
	// AttackSticky).
	Attackers   int
	AttackNames AttackNames
	// TokenGuessers are k3s agents with a wrong join token, at the
	// herd's pace.
	TokenGuessers int
	// Duplicates is how many nodes have a second machine of the same
	// name and another password, retrying all run long.
	Duplicates int
	// StoreFaults is the probability that a store call fails;
	// StoreSpikes that one that does not answers only after StoreSpike
	// (default DefaultStoreSpike).
	StoreFaults, StoreSpikes float64
	StoreSpike               time.Duration
}

// Progress is a run's state, for progress bars.
type Progress struct {
	Joined, Nodes int
	Elapsed       time.Duration
	// Done is true on the last call, with Joined final.
	Done bool
}

// WithDefaults is s with each field left zero set to its default: what
// a run uses.
func (s Scenario) WithDefaults() Scenario {
	s.ClientTimeout = cmp.Or(s.ClientTimeout, DefaultClientTimeout)
	s.Deadline = cmp.Or(s.Deadline, DefaultDeadline)
	s.SampleEvery = cmp.Or(s.SampleEvery, DefaultSampleEvery)
	s.CAAge = cmp.Or(s.CAAge, DefaultCAAge)
	if s.StoreSpikes > 0 {
		s.StoreSpike = cmp.Or(s.StoreSpike, DefaultStoreSpike)
	}
	s.Nodes = cmp.Or(s.Nodes, DefaultNodes)
	s.LogN = cmp.Or(s.LogN, DefaultLogN)
	s.Servers = cmp.Or(s.Servers, 1)
	s.LB = cmp.Or(s.LB, LBSticky)
	s.Mode = cmp.Or(s.Mode, ModeInproc)
	s.MaxHeap = cmp.Or(s.MaxHeap, DefaultMaxHeap)
	s.TimeScale = cmp.Or(s.TimeScale, 1)
	s.Reboot = cmp.Or(s.Reboot, RebootNone)
	s.AttackNames = cmp.Or(s.AttackNames, AttackSticky)
	if s.Agent == nil {
		s.Agent = JitterPolicy{Min: 5 * time.Second, Max: 10 * time.Second}
	}
	return s
}

// Validate reports what is wrong with s as it is, a zero field with a
// default included (cmd/bench sets every field, Run validates after
// WithDefaults); each error names the cmd/bench flag that sets the field.
func (s Scenario) Validate() error {
	var errs []error
	want := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, a...))
		}
	}
	for _, f := range []struct {
		flag      string
		v, lo, hi int
	}{
		{"nodes", s.Nodes, 1, 100000}, {"logn", s.LogN, 1, 20}, {"servers", s.Servers, 1, 64},
		{"bound-sample", s.BoundSample, 0, math.MaxInt}, {"attackers", s.Attackers, 0, 100000},
		{"token-guessers", s.TokenGuessers, 0, 100000},
	} {
		want(f.v >= f.lo && f.v <= f.hi, "-%s %d: want %d to %d", f.flag, f.v, f.lo, f.hi)
	}
	want(s.Hung >= 0 && s.Hung < s.Servers, "-hung %d: want 0 to -servers - 1 (%d): one server at least must answer", s.Hung, s.Servers-1)
	want(s.Known >= 0 && s.Known <= s.Servers, "-known %d: want 0 to -servers (%d)", s.Known, s.Servers)
	want(s.Duplicates >= 0 && s.Duplicates <= s.Nodes, "-duplicates %d: want 0 to -nodes (%d)", s.Duplicates, s.Nodes)
	_, client := s.Agent.(ClientPolicy)
	want(s.Mode == ModeHTTP || s.Hung <= 0 && !s.ValidCerts && !client, "-hung, -certs valid and the nodepass agents need -mode %s", ModeHTTP)
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"timeout", s.ClientTimeout}, {"deadline", s.Deadline}, {"fault-latency", s.StoreSpike}, {"sample interval", s.SampleEvery}} {
		// TimeScale may multiply it by 1000.
		want(f.d >= 0 && float64(f.d) <= math.MaxInt64/1000, "-%s %v: want 0 or more", f.flag, f.d)
	}
	want(s.TimeScale > 0 && s.TimeScale <= 1000, "time scale %v: want more than 0, at most 1000", s.TimeScale) // false for NaN
	want(s.StoreFaults >= 0 && s.StoreFaults < 1, "-store-faults %v: want a probability, 0 or more and below 1", s.StoreFaults)
	want(s.StoreSpikes >= 0 && s.StoreSpikes <= 1, "-store-spikes %v: want a probability, 0 to 1", s.StoreSpikes)
	want(s.CAAge >= 0 && s.CAAge <= 9*365*24*time.Hour, "-ca-years %.3g: want more than 0, at most 9", s.CAAge.Hours()/(365*24))
	errs = append(errs, new(LB).Set(string(s.LB)), new(Mode).Set(string(s.Mode)), new(Reboot).Set(string(s.Reboot)),
		new(AttackNames).Set(string(s.AttackNames)), s.Agent.validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: invalid scenario: %w", err)
	}
	return nil
}

func (s Scenario) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.TimeScale)
}

// adversity reports whether the scenario has attackers, token guessers,
// duplicates or store faults.
func (s Scenario) adversity() bool {
	return s.Attackers > 0 || s.TokenGuessers > 0 || s.Duplicates > 0 || s.faults()
}

func (s Scenario) faults() bool { return s.StoreFaults > 0 || s.StoreSpikes > 0 }

// setName sets *v to the one of names that s is, in any case, or returns
// an error that says which kind of name it does not know.
func setName[T ~string](v *T, kind, s string, names ...T) error {
	for _, n := range names {
		if strings.EqualFold(s, string(n)) {
			*v = n
			return nil
		}
	}
	return fmt.Errorf("bench: unknown %s %q: want one of %q", kind, s, names)
}

// Set sets m to the mode named s (flag.Value).
func (m *Mode) Set(s string) error { return setName(m, "mode", s, ModeInproc, ModeHTTP) }

// Set sets l to the policy named s (flag.Value).
func (l *LB) Set(s string) error { return setName(l, "load balancer", s, LBSticky, LBFailover) }

func (m Mode) String() string { return string(m) }
func (l LB) String() string   { return string(l) }
