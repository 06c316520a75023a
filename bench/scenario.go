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
	// ModeInproc calls each server model's Ensure directly from the agent
	// goroutines, through the same in-flight cap and status mapping as the
	// HTTP handler. It is what go test -bench uses.
	ModeInproc Mode = "inproc"
	// ModeHTTP runs each server as a real HTTPS server (certificate from a
	// CA made at start) on 127.0.0.1, the model mounted behind httpauth;
	// the agents' clients disable keep-alives, as k3s's do, so every
	// request is a new TLS connection.
	ModeHTTP Mode = "http"
)

// LB is an agent's client-side load-balancing policy over several servers.
type LB string

// Load-balancing policies. Agent i starts on server i mod Servers.
const (
	// LBSticky stays on the current server unless the connection fails
	// (dial or TLS error), as the k3s agent's load balancer does.
	LBSticky LB = "sticky"
	// LBFailover also moves to the next server after a client timeout, a
	// 429 or a 503. The retry delay is the agent policy's either way.
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
	// DefaultCAAge is Scenario.CAAge when left zero: a cluster created
	// three years ago.
	DefaultCAAge = 3 * 365 * 24 * time.Hour
)

// Scenario is one herd: Nodes agents with stored hashes, all rebooted at
// once, asking Servers servers of one model to verify their passwords.
// A zero field means its default; see Scenario.withDefaults.
type Scenario struct {
	// Nodes is the number of agents. Default 320.
	Nodes int
	// LogN is the scrypt cost exponent of the stored hashes (and of hashes
	// a model makes for a node it does not know). Default 15, what k3s
	// uses; tests use 4 to 10.
	LogN int
	// ClientTimeout bounds each agent request, as the k3s agent's HTTP
	// client does. Default 10 s.
	ClientTimeout time.Duration
	// Agent is the agents' retry policy. nil means JitterPolicy (5-10 s),
	// what k3s agents do today.
	Agent Policy
	// Servers is how many servers share the store, each its own model
	// instance (own result cache, own admission). Default 1.
	Servers int
	// LB is the agents' load-balancing policy when Servers > 1. Default
	// LBSticky. It is the k3s agents'; ClientPolicy agents fail over as
	// agent.Client does.
	LB LB
	// Hung is how many of the Servers (the first ones) accept connections
	// and complete the TLS handshake, then never answer, as the
	// incident's server did. At least one server must not hang. Needs
	// ModeHTTP.
	Hung int
	// Known, when positive, is how many servers each agent remembers from
	// before the reboot: the first Known (the hung ones first). A k3s agent
	// starts on one of them (agent i on server i mod Known); a
	// ClientPolicy agent knows them and its configured server, a healthy
	// one. Zero: every agent knows every server, and k3s agent i starts on
	// server i mod Servers.
	Known int
	// ValidCerts starts every agent with the certificates an earlier join
	// left on disk, issued at the start of the run as the servers issue
	// them: a reboot of the agents alone. k3s's agents request theirs
	// again all the same; ClientPolicy agents keep them while they are
	// valid. Needs ModeHTTP.
	ValidCerts bool
	// CAAge is how old the servers' CA is when the run starts: k3s makes
	// its CAs, valid for ten years, when the cluster is created. Default
	// DefaultCAAge; at most 9 years.
	CAAge time.Duration
	// CANotBefore makes the servers issue every certificate with the
	// CA's NotBefore, as k3s and RKE2 did before dynamiclistener's
	// CalculateNotBefore (the incident's RKE2 v1.25). By default its
	// NotBefore is max(now - 1 h, the CA's), as they do today. Either way
	// it is valid for a year from its issue.
	CANotBefore bool
	// Mode is ModeInproc (default) or ModeHTTP.
	Mode Mode
	// Deadline bounds one model's run; a model that has not seen every
	// node join by then stops with "deadline". Default 2 min.
	Deadline time.Duration
	// MaxHeap is the heap guard: a run whose heap objects (runtime/metrics
	// /memory/classes/heap/objects:bytes, live objects and garbage not yet
	// swept, for the whole process) pass it stops with "heap guard".
	// Default 4 GiB.
	MaxHeap uint64
	// TimeScale multiplies every duration of the scenario and of the
	// models: ClientTimeout, Deadline, the agent policy's delays, the
	// 5 QPS limiter and API latency of k3s-v1.25, and nodepass's MaxWait.
	// With TimeScale 2^(LogN-15) a small-logN run keeps the proportions of
	// the real herd (scrypt cost is proportional to 2^LogN). 0 means 1.
	TimeScale float64
	// Seed makes the agents' random delays repeatable. 0 is a seed too.
	Seed uint64
	// SampleEvery is how often the live heap is sampled. Default 5 ms.
	SampleEvery time.Duration
	// BoundSample, when positive, makes Run estimate the lower bound from
	// that many verifications right before the model's run
	// (Herd.EstimateLocalBound), into Result.LocalBound: on a machine
	// whose load changes, a figure taken under the run's own load.
	BoundSample int
	// Progress, if not nil, is called about every 100 ms during a run, and
	// once at its end, from a goroutine of Run's.
	Progress func(Progress)
	// NoDrain makes Run return as soon as its figures are taken: when the
	// run stops early it does not wait for the agents to wind down, nor
	// for server work still running (the unbounded models' scrypt calls
	// cannot be stopped), and it leaves the servers open. Only for a
	// process that exits right after, as cmd/bench's per-model worker
	// does; otherwise all that goes on with nothing left to wait for it.
	NoDrain bool

	// Reboot says what restarted before the measured herd: RebootNone
	// (the default, a cold herd), RebootAgents or RebootAll; see
	// reboot.go. With a reboot, Result.ScryptRuns and the other counts
	// are the measured reboot's only, not the warm-up's.
	Reboot Reboot
	// NoDigestKey runs the nodepass model without remembered
	// verification. By default every nodepass server of a run gets the
	// same random DigestKey (made for the run), so that what one server
	// verified, the others and their successors know through the store.
	// The k3s models have no equivalent.
	NoDigestKey bool
	// ScryptMemory is the nodepass Verifiers' verify.Options.ScryptMemory,
	// each server's: 0 its default, negative no budget.
	ScryptMemory int64

	// Adversity (see attack.go and faults.go); the zero values mean none.

	// Attackers is how many attacker agents send wrong passwords for real
	// node names, each as fast as answers come (see AttackNames).
	Attackers int
	// AttackNames is how attackers pick the names they guess for. Default
	// AttackSticky.
	AttackNames AttackNames
	// TokenGuessers is how many k3s agents with a wrong join token (a
	// new random one per attempt, for the user "node") ask beside the
	// herd, at its pace (Agent's delays).
	TokenGuessers int
	// Duplicates is how many nodes have a second machine with the same
	// hostname and another password, retrying under the Agent policy for
	// the whole run; it never joins. The honest nodes' completion does not
	// wait for them.
	Duplicates int
	// StoreFaults is the probability that a store call (Get or Create, for
	// every model) fails with an injected error.
	StoreFaults float64
	// StoreSpikes is the probability that a store call that does not fail
	// answers only after StoreSpike.
	StoreSpikes float64
	// StoreSpike is the latency of a spike, scaled by TimeScale. Default
	// DefaultStoreSpike when StoreSpikes is positive.
	StoreSpike time.Duration
}

// Progress is a run's state, for progress bars.
type Progress struct {
	Joined, Nodes int
	Elapsed       time.Duration
	// Done is true on the last call, with Joined final.
	Done bool
}

func (s Scenario) withDefaults() Scenario {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&s.ClientTimeout, DefaultClientTimeout)
	def(&s.Deadline, DefaultDeadline)
	def(&s.SampleEvery, DefaultSampleEvery)
	def(&s.CAAge, DefaultCAAge)
	if s.StoreSpikes > 0 {
		def(&s.StoreSpike, DefaultStoreSpike)
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

// validate checks a scenario after withDefaults. Its errors name each
// field by the cmd/bench flag that sets it.
func (s Scenario) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, f := range []struct {
		flag      string
		v, lo, hi int
	}{
		{"nodes", s.Nodes, 1, 100000}, {"logn", s.LogN, 1, 20}, {"servers", s.Servers, 1, 64},
		{"bound-sample", s.BoundSample, 0, math.MaxInt}, {"attackers", s.Attackers, 0, 100000},
		{"token-guessers", s.TokenGuessers, 0, 100000},
	} {
		if f.v < f.lo || f.v > f.hi {
			bad("-%s %d: want %d to %d", f.flag, f.v, f.lo, f.hi)
		}
	}
	if s.Hung < 0 || s.Hung >= s.Servers {
		bad("-hung %d: want 0 to -servers - 1 (%d): one server at least must answer", s.Hung, s.Servers-1)
	}
	if s.Known < 0 || s.Known > s.Servers {
		bad("-known %d: want 0 to -servers (%d)", s.Known, s.Servers)
	}
	if s.Duplicates < 0 || s.Duplicates > s.Nodes {
		bad("-duplicates %d: want 0 to -nodes (%d)", s.Duplicates, s.Nodes)
	}
	_, client := s.Agent.(ClientPolicy)
	if (s.Hung > 0 || s.ValidCerts || client) && s.Mode != ModeHTTP {
		bad("-hung, -certs valid and the nodepass agents need -mode %s", ModeHTTP)
	}
	for _, f := range []struct {
		flag string
		d    time.Duration
	}{{"timeout", s.ClientTimeout}, {"deadline", s.Deadline}, {"fault-latency", s.StoreSpike}, {"sample interval", s.SampleEvery}} {
		if f.d < 0 || float64(f.d) > math.MaxInt64/1000 { // TimeScale may multiply it by 1000
			bad("-%s %v: want 0 or more", f.flag, f.d)
		}
	}
	if !(s.TimeScale > 0 && s.TimeScale <= 1000) { // also rejects NaN
		bad("time scale %v: want more than 0, at most 1000", s.TimeScale)
	}
	if !(s.StoreFaults >= 0 && s.StoreFaults < 1) {
		bad("-store-faults %v: want a probability, 0 or more and below 1", s.StoreFaults)
	}
	if !(s.StoreSpikes >= 0 && s.StoreSpikes <= 1) {
		bad("-store-spikes %v: want a probability, 0 to 1", s.StoreSpikes)
	}
	if s.CAAge < 0 || s.CAAge > 9*365*24*time.Hour {
		bad("-ca-years %.3g: want more than 0, at most 9", s.CAAge.Hours()/(365*24))
	}
	_, lbErr := ParseLB(string(s.LB))
	_, modeErr := ParseMode(string(s.Mode))
	_, rebootErr := ParseReboot(string(s.Reboot))
	_, namesErr := ParseAttackNames(string(s.AttackNames))
	errs = append(errs, lbErr, modeErr, rebootErr, namesErr, s.Agent.validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: invalid scenario: %w", err)
	}
	return nil
}

// Validate reports what is wrong with s as it is, a zero field with a
// default included (cmd/bench sets every field); each error names the
// cmd/bench flag that sets the field.
func (s Scenario) Validate() error { return s.validate() }

// scale multiplies d by the scenario's TimeScale.
func (s Scenario) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * s.TimeScale)
}

// adversity reports whether the scenario has attackers, token guessers,
// duplicates or store faults.
func (s Scenario) adversity() bool {
	return s.Attackers > 0 || s.TokenGuessers > 0 || s.Duplicates > 0 || s.faults()
}

// faults reports whether the scenario injects store faults.
func (s Scenario) faults() bool { return s.StoreFaults > 0 || s.StoreSpikes > 0 }

// parseName returns the one of names that name is, in any case, or an
// error that says which kind of name it does not know.
func parseName[T ~string](kind, name string, names ...T) (T, error) {
	for _, n := range names {
		if strings.EqualFold(name, string(n)) {
			return n, nil
		}
	}
	return "", fmt.Errorf("bench: unknown %s %q: want one of %q", kind, name, names)
}

// ParseLB returns the load-balancing policy named name.
func ParseLB(name string) (LB, error) { return parseName("load balancer", name, LBSticky, LBFailover) }

// ParseMode returns the mode named name.
func ParseMode(name string) (Mode, error) { return parseName("mode", name, ModeInproc, ModeHTTP) }

// Set sets m to the mode named s (flag.Value).
func (m *Mode) Set(s string) (err error) { *m, err = ParseMode(s); return err }

// Set sets l to the policy named s (flag.Value).
func (l *LB) Set(s string) (err error) { *l, err = ParseLB(s); return err }

func (m Mode) String() string { return string(m) }
func (l LB) String() string   { return string(l) }
