package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a run stopped before every node joined, as Result.Stopped says.
const (
	StoppedDeadline  = "deadline"
	StoppedHeapGuard = "heap guard"
)

var (
	errDeadline  = errors.New("bench: run deadline")
	errHeapGuard = errors.New("bench: heap guard")
)

// progressEvery is how often Scenario.Progress is called.
const progressEvery = 100 * time.Millisecond

// Run runs the scenario once against model (one of Models()): every node
// of h (made for sc.Nodes and sc.LogN) asks at once, and keeps asking
// until it has joined or the run stops (its deadline, the heap guard, or
// ctx). A model that did not let every node join is no error: the Result
// says how far it got and why it stopped. The servers get a fresh store
// of h's hashes. Unless sc.NoDrain, Run returns only after the servers'
// work has ended.
func Run(ctx context.Context, sc Scenario, h *Herd, modelName string) (*Result, error) {
	sc, err := checkScenario(sc, h, modelName, false)
	if err != nil {
		return nil, err
	}
	r := newRun(sc, h.Nodes, h.Token)
	s, err := startServers(ctx, sc, h, modelName, r.adv.tracker, true)
	if err != nil {
		return nil, err
	}
	defer s.Close(!sc.NoDrain)
	switch sc.Mode {
	case ModeInproc:
		r.target = &inprocTarget{servers: s.models, second: sc.scale(time.Second), drain: !sc.NoDrain}
	case ModeHTTP:
		if err := r.connect(ctx, s.https.endpoint()); err != nil {
			return nil, err
		}
		defer r.clients.close()
	}
	defer func() {
		if !sc.NoDrain {
			r.target.close()
		}
	}()
	r.halt = s.smp.guard.done
	start := time.Now()
	s.Begin(start)
	res := r.execute(ctx, start)
	s.finish(ctx, res, r.lastAsk)
	return res, nil
}

// checkScenario validates sc and h, and the model's name unless it is
// "", and returns sc with its defaults. A split run (StartServers,
// NewAgents) is over HTTPS, without attackers or duplicates.
func checkScenario(sc Scenario, h *Herd, modelName string, split bool) (Scenario, error) {
	sc = sc.WithDefaults()
	switch err := cmp.Or(sc.Validate(), h.validate(sc)); {
	case err != nil:
		return sc, err
	case modelName != "" && ValidModel(modelName) != nil:
		return sc, ValidModel(modelName)
	case split && sc.Mode != ModeHTTP:
		return sc, fmt.Errorf("bench: a split run is over HTTPS (mode %q), not %q", ModeHTTP, sc.Mode)
	case split && (sc.Attackers > 0 || sc.Duplicates > 0):
		return sc, errors.New("bench: a split run has no attackers or duplicates")
	}
	return sc, nil
}

// run is one model's agents: the herd's, and any attackers and
// duplicates, asking the servers through target.
type run struct {
	sc     Scenario
	nodes  []Node // the honest nodes, one per agent
	token  string // the join token's password the agents send
	policy Policy
	target target
	// halt, when it closes, stops the run as the heap guard's; nil:
	// never.
	halt   <-chan struct{}
	start  time.Time
	joinAt []atomic.Int64 // by agent: its join latency in ns, 0 until it joins
	// lastAsk is, by agent, how its asking ended when it joined on a later
	// attempt than its first; written by the agent's goroutine only, read
	// after all have stopped.
	lastAsk []asked
	adv     *adversaries // attackers, duplicates and their figures

	joined       atomic.Uint64
	firstAttempt atomic.Uint64 // honest agents that joined on their first attempt
	tally                      // the honest agents' attempts
	// clients, for ClientPolicy agents, is what they share; failovers and
	// certsRequested count what their Clients reported.
	clients                   *clientAgents
	failovers, certsRequested atomic.Uint64

	shedMu  sync.Mutex
	shedLog []ShedEvent
}

// tally counts one kind of agent's attempts, requests and failed
// attempts, by what ended them.
type tally struct {
	attempts, requests, handshakes           atomic.Uint64
	shed, timeouts, connErrs, errs, rejected atomic.Uint64
}

// newRun prepares a run of sc (with defaults, validated) for nodes, one
// per honest agent, whose join token is token; its target is to be set
// before execute.
func newRun(sc Scenario, nodes []Node, token string) *run {
	r := &run{
		sc:      sc,
		nodes:   nodes,
		token:   token,
		policy:  sc.Agent.scaled(sc.TimeScale),
		joinAt:  make([]atomic.Int64, sc.Nodes),
		lastAsk: make([]asked, sc.Nodes),
	}
	r.adv = newAdversaries(sc, nodes, token)
	return r
}

// execute starts every agent at once at start and waits until all have
// joined or the run stops, and returns the agents' figures: what they
// sent and were answered, and when each joined. Its CPU figures are this
// process's.
func (r *run) execute(ctx context.Context, start time.Time) *Result {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, start.Add(r.sc.scale(r.sc.Deadline)), errDeadline)
	defer cancelDeadline()
	go func() {
		select {
		case <-r.halt:
			cancel(errHeapGuard)
		case <-ctx.Done():
		}
	}()
	time.Sleep(time.Until(start))
	r.start = start
	cpu0 := processCPU()
	var progress sync.WaitGroup
	progressDone := make(chan struct{})
	progress.Go(func() { r.progress(progressDone) })

	// Attackers and duplicates never finish by themselves: they stop when
	// every honest node has joined or the run stops. They are in place
	// before the herd starts.
	advCtx, stopAdversaries := context.WithCancel(ctx)
	defer stopAdversaries()
	var adversaries sync.WaitGroup
	guessersTried := r.startAdversaries(advCtx, &adversaries)
	var agents sync.WaitGroup
	for i := range r.sc.Nodes {
		agents.Go(func() { r.agent(ctx, i) })
	}
	agentsDone := make(chan struct{})
	go func() {
		agents.Wait()
		close(agentsDone)
	}()
	stopped := ctx.Done()
	if !r.sc.NoDrain {
		stopped = nil // wait for every agent to have stopped
	}
	select {
	case <-agentsDone:
		guessersTried.Wait() // each has met the servers once; ctx ends them otherwise
	case <-stopped:
		// A process that exits after the run does not wait for its agents
		// to wind down: under an unbounded model they queue for the CPUs
		// behind hundreds of scrypt calls, for seconds, while the heap
		// grows. The figures are taken now; later joins do not count.
	}
	stopAdversaries()
	elapsed := time.Since(r.start)
	cpu := processCPU() - cpu0
	if !r.sc.NoDrain {
		adversaries.Wait()
	}
	close(progressDone)
	progress.Wait()

	return r.result(ctx, elapsed, cpu)
}

// result returns the agents' figures of a run that took elapsed and cpu,
// its stop said from ctx's cause.
func (r *run) result(ctx context.Context, elapsed, cpu time.Duration) *Result {
	res := &Result{
		Nodes: r.sc.Nodes, LogN: r.sc.LogN, Mode: r.sc.Mode, Agent: r.sc.Agent.String(), Servers: r.sc.Servers, LB: r.sc.LB,
		Hung: r.sc.Hung, Known: r.sc.Known, ValidCerts: r.sc.ValidCerts,
		Attempts: r.attempts.Load(), Requests: r.requests.Load(), Handshakes: r.handshakes.Load(), Shed: r.shed.Load(),
		Failovers: r.failovers.Load(), CertsRequested: r.certsRequested.Load(),
		Timeouts: r.timeouts.Load(), ConnErrors: r.connErrs.Load(), Errors: r.errs.Load(),
		Completion: elapsed, CPU: cpu, Procs: runtime.GOMAXPROCS(0), FirstAttempt: int(r.firstAttempt.Load()),
	}
	if r.sc.adversity() { // the servers' side adds its computations
		res.Attack = r.adv.result()
	}
	for i := range r.joinAt {
		if d := time.Duration(r.joinAt[i].Load()); d > 0 && d <= elapsed {
			res.JoinTimes = append(res.JoinTimes, d)
		}
	}
	res.Joined = len(res.JoinTimes)
	r.shedMu.Lock()
	for _, e := range r.shedLog {
		if e.T <= elapsed {
			res.ShedLog = append(res.ShedLog, e)
		}
	}
	r.shedMu.Unlock()
	slices.SortFunc(res.ShedLog, func(a, b ShedEvent) int { return cmp.Compare(a.T, b.T) })
	slices.Sort(res.JoinTimes)
	if res.Joined == res.Nodes {
		res.Completion = res.JoinTimes[len(res.JoinTimes)-1]
		return res
	}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errHeapGuard):
		// The servers' sampler says by how much (sampler.end).
		res.Stopped = StoppedHeapGuard
	case errors.Is(cause, errDeadline):
		res.Stopped = StoppedDeadline
		res.StopDetail = fmt.Sprintf("%d of %d nodes joined by the %v deadline", res.Joined, res.Nodes, r.sc.scale(r.sc.Deadline))
	default:
		res.Stopped = fmt.Sprintf("cancelled: %v", cause)
	}
	return res
}

// progress calls Scenario.Progress about every progressEvery until done
// is closed, and once more then.
func (r *run) progress(done <-chan struct{}) {
	if r.sc.Progress == nil {
		return
	}
	report := func(final bool) {
		r.sc.Progress(Progress{Joined: int(r.joined.Load()), Nodes: r.sc.Nodes, Elapsed: time.Since(r.start), Done: final})
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		select {
		case <-done:
			report(true)
			return
		case <-tick.C:
			report(false)
		}
	}
}

// agent is one node: it asks until it has joined or ctx ends.
func (r *run) agent(ctx context.Context, i int) {
	a := asker{
		client: i, server: i % cmp.Or(r.sc.Known, r.sc.Servers), node: r.nodes[i],
		rng: rand.New(rand.NewPCG(r.sc.Seed, uint64(i))), tally: &r.tally, logShed: true,
	}
	var got asked
	if p, ok := r.policy.(ClientPolicy); ok {
		got = r.clientAgent(ctx, i, p, r.clients)
	} else {
		got = r.ask(ctx, a)
	}
	if got.ok {
		r.joinAt[i].Store(int64(max(time.Since(r.start), 1)))
		r.joined.Add(1)
		if got.Attempts == 1 {
			r.firstAttempt.Add(1)
		} else {
			r.lastAsk[i] = got
		}
	}
}

// asked is how an agent's asking ended.
type asked struct {
	ok       bool          // its last attempt succeeded
	Attempts int           `json:"attempts"` // attempts made
	Last     time.Duration `json:"last_ns"`  // when the last attempt's first password-guarded request was sent (or the attempt began, if none was), since the run's start
	Server   int           `json:"server"`   // the server the last attempt went to
}

// asker is what one agent's requests carry and where they are counted.
type asker struct {
	client, server int // the agent's own client; the server it starts on
	node           Node
	rng            *rand.Rand
	tally          *tally
	logShed        bool   // add shed answers to the run's shed log
	onReject       func() // if not nil, called after each 403
}

// ask makes a.node's attempts (see attempt) until one succeeds (ok) or
// ctx ends, waiting under the agent policy after each failure, as a k3s
// agent does.
func (r *run) ask(ctx context.Context, a asker) asked {
	server := a.server
	for failures := 1; ; failures++ {
		sent := time.Now()
		a.tally.attempts.Add(1)
		o, requests, handshakes := attempt(ctx, r.target, r.sc.scale(r.sc.ClientTimeout), a.client, server, a.node, r.token)
		a.tally.requests.Add(uint64(requests))
		a.tally.handshakes.Add(uint64(handshakes))
		if !o.guardedAt.IsZero() {
			sent = o.guardedAt
		}
		got := asked{Attempts: failures, Last: sent.Sub(r.start), Server: server}
		if o.status == http.StatusOK {
			got.ok = true
			return got
		}
		if ctx.Err() != nil {
			return got // the run stopped; this attempt's failure is not the server's
		}
		shed := o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable
		switch {
		case o.timeout:
			a.tally.timeouts.Add(1)
		case shed:
			a.tally.shed.Add(1)
			if a.logShed {
				r.shedMu.Lock()
				r.shedLog = append(r.shedLog, ShedEvent{T: time.Since(r.start), Node: a.client, Server: server, Status: o.status,
					RetryAfter: o.retryAfter, Waited: o.took})
				r.shedMu.Unlock()
			}
		case o.connErr:
			a.tally.connErrs.Add(1)
		default:
			a.tally.errs.Add(1)
			if o.status == http.StatusForbidden {
				a.tally.rejected.Add(1)
				if a.onReject != nil {
					a.onReject()
				}
			}
		}
		if o.connErr || r.sc.LB == LBFailover && (o.timeout || shed) {
			server = (server + 1) % r.sc.Servers
		}
		wait := time.NewTimer(r.policy.Delay(failures, o.retryAfter, a.rng))
		select {
		case <-ctx.Done():
			wait.Stop()
			return got
		case <-wait.C:
		}
	}
}
