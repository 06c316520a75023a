package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// Servers is one run's servers: the model instances over the store
// (after a reboot's warm-up), wrapped by the run's tracker, behind HTTPS
// in http mode, and what the run learns from them. In-process it shares
// its process with the agents (Run); split, it is a process of its own
// (StartServers), whose methods are called in order, from one goroutine:
// Endpoint, Begin, then Finish or Close.
type Servers struct {
	sc        Scenario
	h         *Herd
	modelName string
	faults    *faultStore // nil without store faults
	tracker   *tracker
	env       serverEnv
	raw       []model // the model instances
	models    []model // raw, each wrapped by the tracker
	warm      warmup
	https     *httpServers // nil in-process
	smp       *sampler
	// localBound and localTransport are the lower bound estimated right
	// before the run (Scenario.BoundSample), 0 if not asked for.
	localBound, localTransport time.Duration
}

// startServers estimates the local lower bound if sc asks for it, makes
// sc.Servers instances of the model over a fresh store of h's hashes,
// warms them up for a reboot and serves them; t attributes their
// computations. agentsHere says the agents share this process's CPUs:
// in http mode the local lower bound then counts their requests
// (Herd.EstimateTransport).
func startServers(ctx context.Context, sc Scenario, h *Herd, modelName string, t *tracker, agentsHere bool) (_ *Servers, err error) {
	mem, store, faults := herdStore(sc, h)
	s := &Servers{sc: sc, h: h, modelName: modelName, faults: faults, tracker: t, smp: newSampler(sc)}
	if s.localBound, s.localTransport, err = h.LocalBounds(ctx, sc, modelName, agentsHere); err != nil {
		return nil, err
	}
	params := verify.DefaultParams
	params.LogN = sc.LogN
	s.env = newServerEnv(sc, modelName, h.Token)
	// servers makes the run's model instances, told to t if observed.
	servers := func(observed bool) ([]model, error) {
		ms := make([]model, 0, sc.Servers)
		for i := range sc.Servers {
			var obs *serverObserver
			if observed {
				obs = t.observer(i)
			}
			m, err := newModel(modelName, store, params, sc.TimeScale, s.smp.guard, obs, s.env)
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
	defer func() {
		if err != nil {
			s.Close(true)
		}
	}()
	if sc.Reboot == RebootAll { // the warm-up's servers; those the reboot meets start after it
		warm, err := servers(false)
		if err != nil {
			return nil, err
		}
		s.warm, err = warmUp(ctx, sc, h.Nodes, faults, warm)
		for _, m := range warm {
			m.close(true) // which flushes the digests they have not written yet
		}
		if err != nil {
			return nil, err
		}
	}
	if s.raw, err = servers(true); err != nil {
		return nil, err
	}
	if sc.Reboot == RebootAgents {
		if s.warm, err = warmUp(ctx, sc, h.Nodes, faults, s.raw); err != nil {
			return nil, err
		}
	}
	if sc.Reboot != RebootNone && s.env.digestKey != nil && s.raw[0].keepsState() {
		s.warm.digests = waitDigests(ctx, mem, h.Nodes, 10*time.Second)
	}
	for i, m := range s.raw {
		s.models = append(s.models, t.wrap(m, i))
	}
	if sc.Reboot == RebootAgents && s.raw[0].keepsState() {
		// The servers stayed up: each knows the password of the nodes it
		// verified in the warm-up, from before any guess.
		for i := range h.Nodes {
			t.verified(i%sc.Servers, i, 1)
		}
	}
	if sc.Mode == ModeHTTP {
		if s.https, err = newHTTPServers(s.models, sc.Hung, sc); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Begin dates the run from start, when the agents start (Agents.Run):
// from then on the tracker times arrivals and results, and the sampler
// reads this process's heap and CPU time.
func (s *Servers) Begin(start time.Time) {
	s.tracker.start = start
	s.smp.begin(start)
}

// finish stops the sampler and completes res, the agents' figures of the
// run (asks: how each agent's asking ended), with the servers': the
// process's heap and CPU time, the models' counts, when results were
// ready and first requests arrived, store faults, and the lower bounds.
func (s *Servers) finish(ctx context.Context, res *Result, asks []asked) {
	sc := s.sc
	s.smp.end(res)
	if s.https != nil {
		res.Connections = s.https.conns.Load()
	}
	res.Model = s.modelName
	res.Reboot, res.DigestKey = sc.Reboot, s.env.digestKey != nil
	s.tracker.freeze() // before the servers' counts: see freeze
	res.TokenScryptRuns = s.tracker.frozen.TokenScrypt + s.tracker.frozen.TokenGuessScrypt
	c, w := sumCounts(s.models), s.warm.counts
	if sc.Reboot == RebootAgents { // the same servers: the warm-up's counts are theirs
		c.scrypt, c.digestHits, c.cacheHits = c.scrypt-w.scrypt, c.digestHits-w.digestHits, c.cacheHits-w.cacheHits
	}
	res.ScryptRuns, res.DigestHits, res.CacheHits, res.ShedAfterWait = c.scrypt, c.digestHits, c.cacheHits, c.shedAfterWait
	res.WarmupScrypt, res.Warmup, res.WarmupDigests = w.scrypt, s.warm.took, s.warm.digests
	for _, e := range res.ShedLog {
		if e.Waited > LateShed {
			res.ShedLate++
		}
	}
	if s.modelName == ModelNodepass {
		res.HeapBound = uint64(sc.Servers)*uint64(ScryptBuffers(sc.ScryptMemory, s.h.LogN)) + heapSlack
	}
	s.readiness(res, asks)
	s.reached(res)
	if s.faults != nil {
		res.Faults = s.faults.figures(s.tracker)
		if res.Stopped == "" {
			recheck(ctx, res.Faults, s.faults, s.tracker, s.models, s.h.Nodes, sc.scale(sc.ClientTimeout))
		}
	}
	res.SetLocalBound(s.localBound, s.localTransport)
	res.finish(s.h.LowerBound, s.h.LowerBoundBatch)
	res.LowerBoundStarved = s.h.BoundStarved()
	if res.Attack != nil {
		s.tracker.attackFigures(res)
	}
}

// Close stops the models (with drain, waiting for the work they still
// run) and the HTTPS servers.
func (s *Servers) Close(drain bool) {
	for _, m := range s.raw {
		m.close(drain)
	}
	if s.https != nil {
		s.https.close()
	}
}

// sampler reads a process's heap and CPU time every Scenario.SampleEvery
// during a run, and the load every second; it trips the heap guard when
// the heap objects pass it.
// The run's unbounded models also ask the guard before every scrypt call.
type sampler struct {
	every time.Duration
	guard *heapGuard
	start time.Time
	cpu   cpuTrace
	load  loadTrace
	done  chan struct{}
	wg    sync.WaitGroup
	// The highest heap figures sampled (HeapReading's; memory is Live +
	// OffHeap).
	peak struct{ live, objects, memory uint64 }
}

func newSampler(sc Scenario) *sampler {
	return &sampler{every: sc.SampleEvery, guard: newHeapGuard(sc.MaxHeap), done: make(chan struct{})}
}

// begin starts sampling; the run started at start.
func (s *sampler) begin(start time.Time) {
	s.start = start
	s.load.begin(time.Now())
	s.wg.Go(s.loop)
}

func (s *sampler) loop() {
	read := func() {
		s.cpu = append(s.cpu, cpuSample{time.Since(s.start), processCPU()})
		h := ReadHeap()
		s.peak.live = max(s.peak.live, h.Live)
		s.peak.objects = max(s.peak.objects, h.Objects)
		s.peak.memory = max(s.peak.memory, h.Live+h.OffHeap)
		if h.Objects > s.guard.max {
			s.guard.stop()
		}
		s.load.read(time.Now())
	}
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		read()
		// Sampling goes on after the run's context ends: the peak is
		// taken until the agents have stopped.
		select {
		case <-s.done:
			read()
			return
		case <-tick.C:
		}
	}
}

// end stops sampling and sets res's heap and CPU figures (the sampled
// process's, until res.Completion), and its stop when the heap guard
// stopped the run.
func (s *sampler) end(res *Result) {
	close(s.done)
	s.wg.Wait()
	c := s.load.end()
	res.LoadMax, res.CPUWait, res.CPUWaitShare, res.OthersCPUShare, res.MachineCPUs = c.load, c.wait, c.waitShare, c.others, onlineCPUs()
	res.PeakHeap, res.PeakHeapObjects, res.PeakMemory = s.peak.live, s.peak.objects, s.peak.memory
	res.Procs = runtime.GOMAXPROCS(0)
	if cpu, ok := s.cpu.at(res.Completion); ok {
		res.CPU = cpu
	}
	if res.Stopped != "" && s.guard.tripped.Load() {
		res.Stopped = StoppedHeapGuard
		// The guard trips when a scrypt call would take the heap in use
		// past it (heapGuard.admit), or when a sample finds it past.
		verb := "the next scrypt would have taken the heap in use past"
		if s.peak.objects > s.guard.max {
			verb = "the heap in use passed"
		}
		res.StopDetail = fmt.Sprintf("%s the %d MiB guard (peak heap in use %d MiB)", verb, s.guard.max>>20, s.peak.objects>>20)
	}
}

// LateShed is how long a request must have been held before a 429 or 503
// for Result.ShedLate to count it: longer than any answer given at once
// takes, even on a loaded machine.
const LateShed = time.Second

// ReturnBuckets are the upper edges of the buckets ReturnHistogram counts
// Result.Returns in; the last bucket has no upper edge.
var ReturnBuckets = []time.Duration{-5 * time.Second, -time.Second, 0, time.Second, 2 * time.Second, 5 * time.Second}

// ReturnHistogram counts returns by ReturnBuckets: counts[i] holds the
// returns below ReturnBuckets[i] and at or above the edge before it; the
// last count holds those at or above the last edge.
func ReturnHistogram(returns []time.Duration) []int {
	counts := make([]int, len(ReturnBuckets)+1)
	for _, d := range returns { // the first bucket whose upper edge is above d
		counts[sort.Search(len(ReturnBuckets), func(i int) bool { return ReturnBuckets[i] > d })]++
	}
	return counts
}

// cpuTrace is the process's CPU time as the run went, to read at a moment
// found only afterwards: the sampler appends to it, and reads it once it
// has stopped.
type cpuTrace []cpuSample

type cpuSample struct{ at, cpu time.Duration } // since the run began, and used by then

// at returns the CPU time used by t, interpolated between the samples
// around it, relative to the first sample; ok is false without samples on
// both sides of t.
func (c cpuTrace) at(t time.Duration) (cpu time.Duration, ok bool) {
	i := sort.Search(len(c), func(i int) bool { return c[i].at >= t })
	if i == len(c) || i == 0 && c[0].at != t {
		return 0, false
	}
	first, hi := c[0], c[i]
	if hi.at == t {
		return hi.cpu - first.cpu, true
	}
	lo := c[i-1]
	f := float64(t-lo.at) / float64(hi.at-lo.at)
	return lo.cpu + time.Duration(f*float64(hi.cpu-lo.cpu)) - first.cpu, true
}

// readiness fills res's Returns, LastReady and IdlePending: when each
// node that came back did so relative to its result being ready (asks:
// how each agent's asking ended), and the CPU left idle while results
// were pending.
func (s *Servers) readiness(res *Result, asks []asked) {
	t := s.tracker
	res.LastReady = res.Completion
	if s.raw[0].keepsState() && res.Stopped == "" {
		var last time.Duration
		for i, a := range asks {
			ready := time.Duration(t.verifiedAt[a.Server][i].Load())
			if ready <= 1 { // known before the run (1) or never
				for s := range t.verifiedAt {
					ready = max(ready, time.Duration(t.verifiedAt[s][i].Load()))
				}
			}
			last = max(last, ready)
			if a.Attempts > 1 && ready > 1 {
				res.Returns = append(res.Returns, a.Last-ready)
			}
		}
		if last > 1 {
			res.LastReady = last
		}
	}
	if cpu, ok := s.smp.cpu.at(res.LastReady); ok {
		res.IdlePending = max(time.Duration(res.Procs)*res.LastReady-cpu, 0)
	}
}

// reached fills res's ReachedFirst, ReachedMedian and ReachedLast from
// when each honest node's first request reached a server.
func (s *Servers) reached(res *Result) {
	var at []time.Duration
	for i := range s.tracker.reachedAt {
		if d := time.Duration(s.tracker.reachedAt[i].Load()); d > 0 {
			at = append(at, d)
		}
	}
	if len(at) == 0 {
		return
	}
	slices.Sort(at)
	res.ReachedFirst, res.ReachedMedian, res.ReachedLast = at[0], at[rank(len(at), 0.50)], at[len(at)-1]
}
