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

	"github.com/nodepass/nodepass/verify"
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

// heapPeaks are the highest heap figures sampled in a run.
type heapPeaks struct {
	live, objects uint64
	maxGap        time.Duration // longest time between two samples
}

// progressEvery is how often Scenario.Progress is called.
const progressEvery = 100 * time.Millisecond

// Run runs the scenario once against model (one of Models()): every node
// of h asks at once, and each keeps asking under the agent policy until
// it has joined or the run stops (its deadline, the heap guard, or ctx).
// It returns the run's figures; a model that did not let every node join
// is not an error, its Result says how far it got and why it stopped.
// Errors are for bad input or a failure to set the run up.
//
// h must have been made for sc.Nodes and sc.LogN; h.LowerBound, when
// measured, gives the Result its ratio. The servers get a fresh store
// holding h's hashes. Unless sc.NoDrain, Run returns only after the work
// the servers still had running has ended.
func Run(ctx context.Context, sc Scenario, h *Herd, modelName string) (*Result, error) {
	sc, err := checkRun(sc, h, modelName)
	if err != nil {
		return nil, err
	}
	mem := verify.NewMemoryStore()
	for _, n := range h.Nodes {
		mem.Set(n.Name, n.Hash)
	}
	var store verify.Store = mem
	faults := newFaultStore(mem, sc) // nil without faults
	if faults != nil {
		store = faults
	}
	return runOver(ctx, sc, h, modelName, mem, store, faults)
}

// checkRun validates a run's input and returns sc with its defaults.
func checkRun(sc Scenario, h *Herd, modelName string) (Scenario, error) {
	sc = sc.withDefaults()
	if err := sc.validate(); err != nil {
		return sc, err
	}
	if err := ValidModel(modelName); err != nil {
		return sc, err
	}
	return sc, h.validate(sc)
}

// runOver runs the herd against servers over store. mem is the memory
// store under it, which a reboot's warm-up uses; faults, when not nil, is
// the fault-injecting store between the two.
func runOver(ctx context.Context, sc Scenario, h *Herd, modelName string, mem *verify.MemoryStore, store verify.Store, faults *faultStore) (*Result, error) {
	var localBound, localTransport time.Duration
	if sc.BoundSample > 0 {
		var err error
		if localBound, err = h.EstimateLowerBound(ctx, sc.BoundSample, ModelScrypt(modelName)); err != nil {
			return nil, err
		}
		if localTransport, err = h.EstimateTransport(ctx, sc); err != nil {
			return nil, err
		}
	}
	params := verify.DefaultParams
	params.LogN = sc.LogN
	models := make([]model, 0, sc.Servers)
	var tgt target
	defer func() {
		for _, m := range models {
			m.close(!sc.NoDrain)
		}
		if tgt != nil && !sc.NoDrain {
			tgt.close()
		}
	}()
	r := newRun(sc, h.Nodes)
	clock := new(simClock)
	env, err := newServerEnv(sc, modelName, clock)
	if err != nil {
		return nil, err
	}
	servers := func(obs func(int) *serverObserver) ([]model, error) {
		ms := make([]model, 0, sc.Servers)
		for i := range sc.Servers {
			m, err := newModel(modelName, store, params, sc.TimeScale, r.guard, obs(i), env)
			if err != nil {
				for _, m := range ms {
					m.close(true)
				}
				return nil, err
			}
			ms = append(ms, m)
		}
		return ms, nil
	}
	// The servers the reboot meets: with RebootAll, those of the warm-up
	// are closed (which flushes their digests) and these start after it.
	var raw []model
	if sc.Reboot != RebootAll {
		if raw, err = servers(r.adv.tracker.observer); err != nil {
			return nil, err
		}
	}
	var warm warmup
	if sc.Reboot != RebootNone {
		if warm, err = rebootWarmUp(ctx, sc, h.Nodes, mem, faults, raw, env.digestKey != nil, func() ([]model, error) {
			return servers(func(int) *serverObserver { return nil })
		}); err != nil {
			for _, m := range raw {
				m.close(true)
			}
			return nil, err
		}
		clock.advance(RebootGap)
	}
	if sc.Reboot == RebootAll {
		if raw, err = servers(r.adv.tracker.observer); err != nil {
			return nil, err
		}
	}
	for i, m := range raw {
		models = append(models, r.adv.tracker.wrap(m, i))
	}
	if sc.Reboot == RebootAgents && raw[0].keepsState() {
		// The servers stayed up: each knows the password of the nodes it
		// verified in the warm-up, from before any guess.
		for i := range h.Nodes {
			r.adv.tracker.knew(i%sc.Servers, i)
		}
	}
	switch sc.Mode {
	case ModeInproc:
		tgt = &inprocTarget{servers: models, second: sc.scale(time.Second), drain: !sc.NoDrain}
	case ModeHTTP:
		srv, err := newHTTPServers(models)
		if err != nil {
			return nil, err
		}
		agents, err := newHTTPAgents(ctx, srv.urls, srv.ca.pem, r.clientNames())
		if err != nil {
			srv.close()
			return nil, err
		}
		tgt = httpTarget{agents, srv}
	}
	r.target = tgt
	res := r.execute(ctx)
	if t, ok := tgt.(httpTarget); ok {
		res.Connections = t.srv.conns.Load()
	}
	res.Model = modelName
	res.Reboot, res.DigestKey = sc.Reboot, env.digestKey != nil
	for _, m := range models {
		res.ShedAfterWait += m.shedAfterWait()
		res.ScryptRuns += m.scryptRuns()
		d, c := m.remembered()
		res.DigestHits += d
		res.CacheHits += c
	}
	if sc.Reboot == RebootAgents { // the same servers: the warm-up's counts are theirs
		res.ScryptRuns -= warm.scrypt
		res.DigestHits -= warm.digestHits
		res.CacheHits -= warm.cacheHits
	}
	res.WarmupScrypt, res.Warmup, res.WarmupDigests = warm.scrypt, warm.took, warm.digests
	for _, e := range res.ShedLog {
		if e.Waited > LateShed {
			res.ShedLate++
		}
	}
	r.readiness(res, raw[0].keepsState())
	r.reached(res)
	r.adv.figures(res)
	if faults != nil {
		res.Faults = faults.figures(r.adv.tracker)
		if res.Stopped == "" {
			recheck(ctx, res.Faults, faults, r.adv.tracker, models, h.Nodes, sc.scale(sc.ClientTimeout))
		}
	}
	res.SetLocalBound(localBound, localTransport)
	res.finish(h.LowerBound, h.LowerBoundFast, h.LowerBoundBatch)
	return res, nil
}

// run is one model's run in progress.
type run struct {
	sc     Scenario
	nodes  []Node // the honest nodes, one per agent
	policy Policy
	target target
	guard  *heapGuard
	cancel context.CancelCauseFunc // ends the run; set by execute
	start  time.Time
	joinAt []atomic.Int64 // by agent: its join latency in ns, 0 until it joins
	// lastAsk is, by agent, how its asking ended when it joined on a later
	// request than its first; written by the agent's goroutine only, read
	// after all have stopped.
	lastAsk []asked
	cpu     cpuTrace     // the process's CPU time during the run
	adv     *adversaries // attackers, duplicates and their figures

	joined       atomic.Uint64
	firstAttempt atomic.Uint64 // honest agents that joined on their first request
	tally                      // the honest agents' requests

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
// per honest agent; its target is to be set before execute.
func newRun(sc Scenario, nodes []Node) *run {
	r := &run{
		sc:      sc,
		nodes:   nodes,
		policy:  sc.Agent.scaled(sc.TimeScale),
		joinAt:  make([]atomic.Int64, sc.Nodes),
		lastAsk: make([]asked, sc.Nodes),
	}
	r.adv = newAdversaries(sc, nodes)
	r.guard = &heapGuard{max: sc.MaxHeap, trip: func() { r.cancel(errHeapGuard) }}
	return r
}

// execute starts every agent at once and waits until all have joined or
// the run stops.
func (r *run) execute(ctx context.Context) *Result {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ctx, cancelDeadline := context.WithTimeoutCause(ctx, r.sc.scale(r.sc.Deadline), errDeadline)
	defer cancelDeadline()
	r.cancel = cancel // for the guard; set before any goroutine can trip it

	cpu0 := processCPU()
	r.start = time.Now()
	r.adv.tracker.start = r.start // its times and the run's count from the same moment
	samplerDone := make(chan struct{})
	var peak heapPeaks
	var sampler sync.WaitGroup
	sampler.Go(func() { peak = r.sample(samplerDone) })

	// Attackers and duplicates never finish by themselves: they stop when
	// every honest node has joined or the run stops. They are in place
	// before the herd starts.
	advCtx, stopAdversaries := context.WithCancel(ctx)
	defer stopAdversaries()
	var adversaries sync.WaitGroup
	r.startAdversaries(advCtx, &adversaries)
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
	close(samplerDone)
	sampler.Wait()

	res := &Result{
		Nodes:           r.sc.Nodes,
		LogN:            r.sc.LogN,
		Mode:            r.sc.Mode,
		Agent:           r.sc.Agent.String(),
		Servers:         r.sc.Servers,
		LB:              r.sc.LB,
		Attempts:        r.attempts.Load(),
		Requests:        r.requests.Load(),
		Handshakes:      r.handshakes.Load(),
		Shed:            r.shed.Load(),
		Timeouts:        r.timeouts.Load(),
		ConnErrors:      r.connErrs.Load(),
		Errors:          r.errs.Load(),
		PeakHeap:        peak.live,
		PeakHeapObjects: peak.objects,
		MaxSampleGap:    peak.maxGap,
		Completion:      elapsed,
		CPU:             cpu,
		Procs:           runtime.GOMAXPROCS(0),
	}
	for i := range r.joinAt {
		if d := time.Duration(r.joinAt[i].Load()); d > 0 && d <= elapsed {
			res.JoinTimes = append(res.JoinTimes, d)
		}
	}
	res.Joined = len(res.JoinTimes)
	res.FirstAttempt = int(r.firstAttempt.Load())
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
		res.Stopped = StoppedHeapGuard
		res.StopDetail = fmt.Sprintf("heap in use passed the %d MiB guard (peak %d MiB)", r.sc.MaxHeap>>20, peak.objects>>20)
	case errors.Is(cause, errDeadline):
		res.Stopped = StoppedDeadline
		res.StopDetail = fmt.Sprintf("%d of %d nodes joined by the %v deadline", res.Joined, res.Nodes, r.sc.scale(r.sc.Deadline))
	default:
		res.Stopped = fmt.Sprintf("cancelled: %v", cause)
	}
	return res
}

// sample reads the heap every SampleEvery until done is closed, cancels
// the run when the heap objects pass the guard, reports progress and
// returns the peaks.
func (r *run) sample(done <-chan struct{}) heapPeaks {
	var peak heapPeaks
	read := func() {
		r.cpu.add(time.Since(r.start), processCPU())
		h := ReadHeap()
		peak.live = max(peak.live, h.Live)
		peak.objects = max(peak.objects, h.Objects)
		if h.Objects > r.sc.MaxHeap {
			r.guard.stop()
		}
	}
	report := func(final bool) {
		if r.sc.Progress != nil {
			r.sc.Progress(Progress{Joined: int(r.joined.Load()), Nodes: r.sc.Nodes, Elapsed: time.Since(r.start), Done: final})
		}
	}
	tick := time.NewTicker(r.sc.SampleEvery)
	defer tick.Stop()
	lastReport, lastRead := time.Now(), time.Now()
	for {
		read()
		now := time.Now()
		peak.maxGap = max(peak.maxGap, now.Sub(lastRead))
		lastRead = now
		if time.Since(lastReport) >= progressEvery {
			report(false)
			lastReport = time.Now()
		}
		// Sampling goes on after the run's context ends: the peak is
		// taken until the agents have stopped.
		select {
		case <-done:
			read()
			report(true)
			return peak
		case <-tick.C:
		}
	}
}

func (r *run) logShed(e ShedEvent) {
	r.shedMu.Lock()
	r.shedLog = append(r.shedLog, e)
	r.shedMu.Unlock()
}

// agent is one node: it asks until it has joined or ctx ends.
func (r *run) agent(ctx context.Context, i int) {
	a := asker{
		client: i, server: i % r.sc.Servers, node: r.nodes[i],
		rng: rand.New(rand.NewPCG(r.sc.Seed, uint64(i))), tally: &r.tally, logShed: true,
	}
	if got := r.ask(ctx, a); got.ok {
		r.joinAt[i].Store(int64(max(time.Since(r.start), 1)))
		r.joined.Add(1)
		if got.attempts == 1 {
			r.firstAttempt.Add(1)
		} else {
			r.lastAsk[i] = got
		}
	}
}

// asked is how an agent's asking ended.
type asked struct {
	ok       bool          // its last attempt succeeded
	attempts int           // attempts made
	last     time.Duration // when the last attempt's first password-guarded request was sent (or the attempt began, if none was), since the run's start
	server   int           // the server the last attempt went to
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
		o, requests, handshakes := attempt(ctx, r.target, r.sc.scale(r.sc.ClientTimeout), a.client, server, a.node)
		a.tally.requests.Add(uint64(requests))
		a.tally.handshakes.Add(uint64(handshakes))
		if !o.guardedAt.IsZero() {
			sent = o.guardedAt
		}
		got := asked{attempts: failures, last: sent.Sub(r.start), server: server}
		if o.status == http.StatusOK {
			got.ok = true
			return got
		}
		if ctx.Err() != nil {
			return got // the run stopped; this attempt's failure is not the server's
		}
		moveOn := o.connErr
		switch {
		case o.timeout:
			a.tally.timeouts.Add(1)
			moveOn = moveOn || r.sc.LB == LBFailover
		case o.status == http.StatusTooManyRequests || o.status == http.StatusServiceUnavailable:
			a.tally.shed.Add(1)
			if a.logShed {
				r.logShed(ShedEvent{T: time.Since(r.start), Node: a.client, Server: server, Status: o.status,
					RetryAfter: o.retryAfter, Waited: o.took})
			}
			moveOn = moveOn || r.sc.LB == LBFailover
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
		if moveOn {
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
