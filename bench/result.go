package bench

import (
	"encoding/json"
	"math"
	"time"
)

// Result is one model's figures for one run.
type Result struct {
	Model   string
	Nodes   int
	LogN    int
	Mode    Mode
	Agent   string // the agent policy's name
	Servers int
	LB      LB

	// Joined is how many nodes joined before the run stopped.
	Joined int
	// Completion is the time from the start until the last node joined,
	// or, when the run stopped first (Stopped not empty), until it
	// stopped.
	Completion time.Duration
	// LowerBound is the herd's measured lower bound (see
	// Herd.MeasureLowerBound); 0 if it was not measured.
	LowerBound time.Duration
	// Ratio is Completion / LowerBound; 0 without a lower bound. When the
	// run stopped early it is only a floor.
	Ratio float64
	// RatioFast is Completion over the lower bound with this module's
	// scrypt (Herd.LowerBoundFast); 0 when that was not measured.
	RatioFast float64
	// LowerBoundBatch is the herd's lower bound with this module's scrypt
	// in batches, as the Verifier computes (Herd.LowerBoundBatch), and
	// RatioBatch is Completion over it; both 0 when it was not measured.
	LowerBoundBatch time.Duration
	RatioBatch      float64
	// LocalBound is the lower bound estimated from a sample right before
	// this run (Scenario.BoundSample), with the scrypt the model runs
	// (Herd.EstimateLocalBound: nodepass's in batches), plus, in http
	// mode, LocalTransport; 0 if not asked for. LocalRatio is
	// Completion / LocalBound.
	LocalBound time.Duration
	LocalRatio float64
	// LocalTransport is the part of LocalBound that in http mode the
	// herd's HTTPS takes (Herd.EstimateTransport): an agent's attempt per
	// node, six requests on six TLS connections, on the same CPUs as
	// scrypt; 0 in inproc mode.
	LocalTransport time.Duration
	// Attempts counts the agents' attempts: each the sequence of
	// requests a k3s agent makes to get its configuration (agent.go),
	// ended by the first that fails. Requests counts the requests they
	// sent, and Handshakes the TLS handshakes those started (0 in-process;
	// one per request over HTTPS, a new connection each). Connections
	// counts the connections the servers accepted (every agent, attackers
	// included; 0 in-process).
	Attempts    uint64
	Requests    uint64
	Handshakes  uint64
	Connections uint64
	// Hung, Known and ValidCerts are the Scenario's.
	Hung, Known int
	ValidCerts  bool
	// Failovers counts the times a ClientPolicy agent's request moved on
	// to the next server; CertsRequested the certificates such agents
	// asked for (k3s agents: 0 for both, not counted).
	Failovers, CertsRequested uint64
	// ScryptRuns counts the scrypt computations the servers started
	// during the run, including those whose client had left.
	ScryptRuns uint64
	// ScryptRunsPerNode is ScryptRuns / Joined; 0 when none joined.
	ScryptRunsPerNode float64
	// TokenScryptRuns counts, of ScryptRuns, those over join tokens
	// (the agents' and guessed ones), as the tracker attributed them;
	// the servers' hashing of their token at start is in neither.
	TokenScryptRuns uint64
	// Reboot is Scenario.Reboot. With a reboot, ScryptRuns, DigestHits
	// and CacheHits count the measured reboot only; Ratio is still to the
	// cold lower bound (one scrypt per node).
	Reboot Reboot
	// DigestKey says whether the servers verified with a DigestKey
	// (nodepass unless Scenario.NoDigestKey; the k3s models have no
	// equivalent).
	DigestKey bool
	// FirstAttempt counts the nodes that joined on their first request.
	FirstAttempt int
	// DigestHits and CacheHits count the requests the servers answered as
	// matches without scrypt, from a remembered digest or from their
	// result cache; always 0 for the k3s models, which have neither.
	DigestHits, CacheHits uint64
	// WarmupScrypt counts the scrypt computations of a reboot's warm-up
	// (every node joining once before, not measured), Warmup is how long
	// it took, and WarmupDigests how many nodes had a remembered digest in
	// the store when the reboot began. All 0 without a reboot, and for
	// models that keep nothing a warm-up could leave (the k3s models).
	WarmupScrypt  uint64
	Warmup        time.Duration
	WarmupDigests int
	// P50, P99 and Max are join latencies (from the start of the run,
	// retries included) over the nodes that joined.
	P50, P99, Max time.Duration
	// PeakHeap is the highest live heap (runtime/metrics
	// /gc/heap/live:bytes, as of the last GC) sampled during the run, in
	// bytes, for the whole process (agents and servers).
	PeakHeap uint64
	// HeapBound is, for nodepass, what its scrypt may hold at most, its
	// servers' ScryptBuffers (the scrypt budget, Scenario.ScryptMemory),
	// plus 100 MiB for the rest; 0 for the k3s models, which have none.
	HeapBound uint64
	// Kernel is the scrypt kernel nodepass's process chose for batches at
	// the herd's parameters, and its measured time per hash (see
	// scrypt.Choices); empty for the k3s models.
	Kernel        string
	KernelPerHash time.Duration
	// PeakHeapObjects is the highest heap in use sampled (live objects and
	// garbage not yet swept, /memory/classes/heap/objects:bytes): what the
	// heap guard watches.
	PeakHeapObjects uint64
	// Shed counts answers 429 or 503: the server refused quickly.
	Shed uint64
	// ShedLate counts the answers in Shed that came after the request had
	// been held (ShedEvent.Waited past LateShed): the agent lost the
	// time it was held as well as its retry delay.
	ShedLate uint64
	// ShedAfterWait counts the requests the servers held on an estimate
	// and then sent away all the same (verify.Stats.ShedAfterWait); 0 for
	// the k3s models, which hold nothing on an estimate.
	ShedAfterWait uint64
	// Returns has, for each node that joined on a later request than its
	// first, when that request came relative to when its server had the
	// node's result ready (the end of the computation that verified it):
	// negative, the agent came first and waited; positive, the result
	// waited for the agent, time lost unless the CPU had other work. Only
	// for models that keep a result (nodepass); empty for the k3s models,
	// which compute while the agent waits.
	Returns []time.Duration
	// LastReady is when the last node's result was ready (nodepass), or
	// Completion for models that keep no result: until then work was
	// pending.
	LastReady time.Duration
	// ReachedFirst, ReachedMedian and ReachedLast are when the honest
	// nodes' first requests reached a server's model (in http mode: past
	// the TLS handshake and HTTP), since the run's start: the earliest,
	// the median and the latest; 0 when none did. A request is answered
	// no sooner than it reaches the server, so a herd whose last requests
	// are sent away at once cannot end before ReachedLast plus the agents'
	// retry delay (k3s agents: up to 10 s).
	ReachedFirst, ReachedMedian, ReachedLast time.Duration
	// IdlePending is the CPU time the process left unused until LastReady
	// (Procs × LastReady minus the CPU time used): capacity lost while
	// work was pending, because the scheduler held it back or the run had
	// nothing it could do until agents came back. 0 where CPU time cannot
	// be measured.
	IdlePending time.Duration
	// Timeouts counts requests the agent gave up on at its client
	// timeout.
	Timeouts uint64
	// ConnErrors counts requests that failed to reach a server.
	ConnErrors uint64
	// Errors counts other failed answers (400, 401, 403, 500).
	Errors uint64
	// CPU is the CPU time (user and system) the whole process used during
	// the run, agents included; 0 where it cannot be measured. Against
	// Completion × Procs it shows how much of the machine the run got: a
	// model with work pending that used much less was short of CPU (others
	// ran on the machine) or idle by design (a rate limiter).
	CPU time.Duration
	// MaxSampleGap is the longest time between two heap samples: how late
	// the heap guard may have acted. Scenario.SampleEvery is the plan;
	// a process whose CPUs are saturated by hundreds of goroutines can
	// delay the sampler far past it.
	MaxSampleGap time.Duration
	// Procs is GOMAXPROCS during the run.
	Procs int
	// Split, for a split run (see Servers), says where its agents and
	// servers ran; CPU, Procs and the heap figures are then the servers'
	// process's alone. nil when they shared one process.
	Split *Split
	// Stopped is empty when every node joined, else why the run stopped:
	// StoppedDeadline, StoppedHeapGuard, or "cancelled: ...".
	Stopped string
	// StopDetail says in words what stopped the run, when it stopped
	// early.
	StopDetail string
	// ShedLog lists the answers counted in Shed, in time order: when, to
	// which node, from which server, and the Retry-After they carried.
	ShedLog []ShedEvent
	// JoinTimes are the joined nodes' join latencies, in order: the
	// timeline of joined nodes over time.
	JoinTimes []time.Duration
	// Attack has the attackers' and duplicates' figures and where the
	// scrypt work went; nil when the scenario had neither attackers,
	// duplicates nor store faults.
	Attack *AttackResult
	// Faults has the store faults' figures; nil without store faults.
	Faults *FaultResult
}

// ShedEvent is one answer 429 or 503 an agent got.
type ShedEvent struct {
	T          time.Duration // since the start of the run
	Node       int           // the agent's index in the herd
	Server     int
	Status     int
	RetryAfter time.Duration // 0 when the answer had none
	Waited     time.Duration // how long the request took until this answer
}

type shedJSON struct {
	T          float64 `json:"t_s"`
	Node       int     `json:"node"`
	Server     int     `json:"server"`
	Status     int     `json:"status"`
	RetryAfter float64 `json:"retry_after_s"`
	Waited     float64 `json:"waited_s"`
}

// Point is one step of the timeline: Joined nodes had joined at T.
type Point struct {
	T      time.Duration
	Joined int
}

// Timeline returns joined nodes over time: a point at the start and one
// per join.
func (r *Result) Timeline() []Point {
	pts := make([]Point, 0, len(r.JoinTimes)+1)
	pts = append(pts, Point{})
	for i, t := range r.JoinTimes {
		pts = append(pts, Point{T: t, Joined: i + 1})
	}
	return pts
}

// finish derives the figures that follow from the counts and the herd's
// lower bounds (x/crypto's, this module's scrypt one Key at a time, and in
// batches; 0 when not measured).
func (r *Result) finish(lowerBound, lowerBoundFast, lowerBoundBatch time.Duration) {
	r.LowerBound, r.LowerBoundBatch = lowerBound, lowerBoundBatch
	ratio := func(bound time.Duration) float64 {
		if bound <= 0 {
			return 0
		}
		return float64(r.Completion) / float64(bound)
	}
	r.Ratio, r.RatioFast, r.RatioBatch = ratio(lowerBound), ratio(lowerBoundFast), ratio(lowerBoundBatch)
	r.ScryptRunsPerNode = r.PerNode(r.ScryptRuns)
	if n := len(r.JoinTimes); n > 0 {
		r.P50 = r.JoinTimes[rank(n, 0.50)]
		r.P99 = r.JoinTimes[rank(n, 0.99)]
		r.Max = r.JoinTimes[n-1]
	}
}

// SetLocalBound sets LocalBound to scrypt+transport, LocalTransport to
// transport and LocalRatio to Completion / LocalBound (all 0 when scrypt
// is not positive). Completion must be set first.
func (r *Result) SetLocalBound(scrypt, transport time.Duration) {
	r.LocalBound, r.LocalTransport, r.LocalRatio = 0, 0, 0
	if scrypt > 0 {
		r.LocalBound, r.LocalTransport = scrypt+transport, transport
		r.LocalRatio = float64(r.Completion) / float64(r.LocalBound)
	}
}

// rank is the nearest-rank index of quantile q in n sorted values.
func rank(n int, q float64) int {
	return max(int(math.Ceil(q*float64(n)))-1, 0)
}

// resultJSON is Result on the wire: durations in seconds, heap in MiB.
type resultJSON struct {
	Model             string        `json:"model"`
	Nodes             int           `json:"nodes"`
	LogN              int           `json:"logn"`
	Mode              Mode          `json:"mode"`
	Agent             string        `json:"agent"`
	Servers           int           `json:"servers"`
	LB                LB            `json:"lb"`
	Joined            int           `json:"joined"`
	CompletionS       float64       `json:"completion_s"`
	LowerBoundS       float64       `json:"lower_bound_s"`
	Ratio             float64       `json:"ratio"`
	RatioFast         float64       `json:"ratio_fast,omitempty"`
	LowerBoundBatchS  float64       `json:"lower_bound_batch_s,omitempty"`
	RatioBatch        float64       `json:"ratio_batch,omitempty"`
	LocalBoundS       float64       `json:"local_lower_bound_s,omitempty"`
	LocalTransportS   float64       `json:"local_transport_s,omitempty"`
	LocalRatio        float64       `json:"local_ratio,omitempty"`
	Attempts          uint64        `json:"attempts"`
	Requests          uint64        `json:"requests"`
	Handshakes        uint64        `json:"tls_handshakes"`
	Connections       uint64        `json:"server_connections"`
	AttemptsPerNode   float64       `json:"attempts_per_node"`
	RequestsPerNode   float64       `json:"requests_per_node"`
	HandshakesPerNode float64       `json:"tls_handshakes_per_node"`
	ScryptRuns        uint64        `json:"scrypt_runs"`
	ScryptRunsPerNode float64       `json:"scrypt_runs_per_node"`
	TokenScryptRuns   uint64        `json:"token_scrypt_runs"`
	Hung              int           `json:"hung,omitempty"`
	Known             int           `json:"known,omitempty"`
	ValidCerts        bool          `json:"valid_certs,omitempty"`
	Failovers         uint64        `json:"failovers,omitempty"`
	CertsRequested    uint64        `json:"certs_requested,omitempty"`
	Reboot            Reboot        `json:"reboot,omitempty"`
	DigestKey         bool          `json:"digest_key"`
	FirstAttempt      int           `json:"first_attempt_joins"`
	DigestHits        uint64        `json:"digest_hits"`
	CacheHits         uint64        `json:"cache_hits"`
	WarmupScrypt      uint64        `json:"warmup_scrypt"`
	WarmupS           float64       `json:"warmup_s"`
	WarmupDigests     int           `json:"warmup_digests"`
	P50S              float64       `json:"p50_s"`
	P99S              float64       `json:"p99_s"`
	MaxS              float64       `json:"max_s"`
	PeakHeapMiB       float64       `json:"peak_heap_mib"`
	PeakHeapObjMiB    float64       `json:"peak_heap_objects_mib"`
	HeapBoundMiB      float64       `json:"heap_bound_mib,omitempty"`
	Kernel            string        `json:"kernel,omitempty"`
	KernelPerHashMs   float64       `json:"kernel_per_hash_ms,omitempty"`
	Shed              uint64        `json:"shed"`
	ShedLate          uint64        `json:"shed_late"`
	ShedAfterWait     uint64        `json:"shed_after_wait"`
	ReturnsS          []float64     `json:"returns_s"`
	LastReadyS        float64       `json:"last_ready_s"`
	ReachedFirstS     float64       `json:"reached_first_s"`
	ReachedMedianS    float64       `json:"reached_median_s"`
	ReachedLastS      float64       `json:"reached_last_s"`
	IdlePendingS      float64       `json:"idle_pending_cpu_s"`
	Timeouts          uint64        `json:"timeouts"`
	ConnErrors        uint64        `json:"conn_errors"`
	Errors            uint64        `json:"errors"`
	CPUS              float64       `json:"cpu_s"`
	Procs             int           `json:"procs"`
	Split             *Split        `json:"split,omitempty"`
	MaxSampleGapS     float64       `json:"max_sample_gap_s"`
	Stopped           string        `json:"stopped"`
	StopDetail        string        `json:"stop_detail,omitempty"`
	Timeline          [][]float64   `json:"timeline"` // [seconds, joined] pairs
	ShedLog           []shedJSON    `json:"shed_log"`
	Attack            *AttackResult `json:"attack,omitempty"`
	Faults            *FaultResult  `json:"faults,omitempty"`
}

// MarshalJSON writes r with the keys cmd/bench's -json documents:
// durations as seconds (completion_s, p50_s, ...), the peak heap in MiB
// (peak_heap_mib), stopped empty when every node joined, timeline as
// [seconds, joined] pairs, shed_log as objects (t_s, node, server,
// status, retry_after_s, waited_s) and returns_s in seconds; attack and faults (see AttackResult and
// FaultResult) only when the scenario had them.
func (r Result) MarshalJSON() ([]byte, error) {
	j := resultJSON{
		Model: r.Model, Nodes: r.Nodes, LogN: r.LogN, Mode: r.Mode, Agent: r.Agent,
		Servers: r.Servers, LB: r.LB, Joined: r.Joined,
		CompletionS: r.Completion.Seconds(), LowerBoundS: r.LowerBound.Seconds(),
		Ratio: r.Ratio, RatioFast: r.RatioFast, LowerBoundBatchS: r.LowerBoundBatch.Seconds(), RatioBatch: r.RatioBatch,
		LocalBoundS: r.LocalBound.Seconds(), LocalRatio: r.LocalRatio,
		LocalTransportS: r.LocalTransport.Seconds(),
		Attempts:        r.Attempts, Requests: r.Requests, Handshakes: r.Handshakes, Connections: r.Connections,
		AttemptsPerNode: r.PerNode(r.Attempts), RequestsPerNode: r.PerNode(r.Requests), HandshakesPerNode: r.PerNode(r.Handshakes),
		ScryptRuns:        r.ScryptRuns,
		ScryptRunsPerNode: r.ScryptRunsPerNode,
		TokenScryptRuns:   r.TokenScryptRuns,
		Hung:              r.Hung,
		Known:             r.Known,
		ValidCerts:        r.ValidCerts,
		Failovers:         r.Failovers,
		CertsRequested:    r.CertsRequested,
		Reboot:            r.Reboot, DigestKey: r.DigestKey, FirstAttempt: r.FirstAttempt,
		DigestHits: r.DigestHits, CacheHits: r.CacheHits,
		WarmupScrypt: r.WarmupScrypt, WarmupS: r.Warmup.Seconds(), WarmupDigests: r.WarmupDigests,
		P50S: r.P50.Seconds(), P99S: r.P99.Seconds(), MaxS: r.Max.Seconds(),
		PeakHeapMiB: mib(r.PeakHeap), PeakHeapObjMiB: mib(r.PeakHeapObjects), HeapBoundMiB: mib(r.HeapBound),
		Kernel: r.Kernel, KernelPerHashMs: float64(r.KernelPerHash) / 1e6,
		Shed: r.Shed, ShedLate: r.ShedLate, ShedAfterWait: r.ShedAfterWait,
		ReturnsS: make([]float64, 0, len(r.Returns)), LastReadyS: r.LastReady.Seconds(), IdlePendingS: r.IdlePending.Seconds(),
		ReachedFirstS: r.ReachedFirst.Seconds(), ReachedMedianS: r.ReachedMedian.Seconds(), ReachedLastS: r.ReachedLast.Seconds(),
		Timeouts: r.Timeouts, ConnErrors: r.ConnErrors, Errors: r.Errors,
		CPUS: r.CPU.Seconds(), Procs: r.Procs, Split: r.Split, MaxSampleGapS: r.MaxSampleGap.Seconds(),
		Stopped: r.Stopped, StopDetail: r.StopDetail,
		Timeline: make([][]float64, 0, len(r.JoinTimes)+1),
		Attack:   r.Attack, Faults: r.Faults,
	}
	for _, p := range r.Timeline() {
		j.Timeline = append(j.Timeline, []float64{p.T.Seconds(), float64(p.Joined)})
	}
	j.ShedLog = make([]shedJSON, 0, len(r.ShedLog))
	for _, e := range r.ShedLog {
		j.ShedLog = append(j.ShedLog, shedJSON{e.T.Seconds(), e.Node, e.Server, e.Status, e.RetryAfter.Seconds(), e.Waited.Seconds()})
	}
	for _, d := range r.Returns {
		j.ReturnsS = append(j.ReturnsS, d.Seconds())
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j resultJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	secs := func(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
	*r = Result{
		Model: j.Model, Nodes: j.Nodes, LogN: j.LogN, Mode: j.Mode, Agent: j.Agent,
		Servers: j.Servers, LB: j.LB, Joined: j.Joined,
		Completion: secs(j.CompletionS), LowerBound: secs(j.LowerBoundS),
		Ratio: j.Ratio, RatioFast: j.RatioFast, LowerBoundBatch: secs(j.LowerBoundBatchS), RatioBatch: j.RatioBatch,
		LocalBound: secs(j.LocalBoundS), LocalRatio: j.LocalRatio,
		LocalTransport: secs(j.LocalTransportS),
		Attempts:       j.Attempts, Requests: j.Requests, Handshakes: j.Handshakes, Connections: j.Connections,
		ScryptRuns:        j.ScryptRuns,
		ScryptRunsPerNode: j.ScryptRunsPerNode,
		TokenScryptRuns:   j.TokenScryptRuns,
		Hung:              j.Hung,
		Known:             j.Known,
		ValidCerts:        j.ValidCerts,
		Failovers:         j.Failovers,
		CertsRequested:    j.CertsRequested,
		Reboot:            j.Reboot, DigestKey: j.DigestKey, FirstAttempt: j.FirstAttempt,
		DigestHits: j.DigestHits, CacheHits: j.CacheHits,
		WarmupScrypt: j.WarmupScrypt, Warmup: secs(j.WarmupS), WarmupDigests: j.WarmupDigests,
		P50: secs(j.P50S), P99: secs(j.P99S), Max: secs(j.MaxS),
		PeakHeap: fromMiB(j.PeakHeapMiB), PeakHeapObjects: fromMiB(j.PeakHeapObjMiB), HeapBound: fromMiB(j.HeapBoundMiB),
		Kernel: j.Kernel, KernelPerHash: time.Duration(math.Round(j.KernelPerHashMs * 1e6)),
		Shed: j.Shed, ShedLate: j.ShedLate, ShedAfterWait: j.ShedAfterWait,
		LastReady: secs(j.LastReadyS), IdlePending: secs(j.IdlePendingS),
		ReachedFirst: secs(j.ReachedFirstS), ReachedMedian: secs(j.ReachedMedianS), ReachedLast: secs(j.ReachedLastS),
		Timeouts: j.Timeouts, ConnErrors: j.ConnErrors, Errors: j.Errors,
		CPU: secs(j.CPUS), Procs: j.Procs, Split: j.Split, MaxSampleGap: secs(j.MaxSampleGapS),
		Stopped: j.Stopped, StopDetail: j.StopDetail,
		Attack: j.Attack, Faults: j.Faults,
	}
	for _, e := range j.ShedLog {
		r.ShedLog = append(r.ShedLog, ShedEvent{secs(e.T), e.Node, e.Server, e.Status, secs(e.RetryAfter), secs(e.Waited)})
	}
	for _, d := range j.ReturnsS {
		r.Returns = append(r.Returns, secs(d))
	}
	for _, p := range j.Timeline {
		if len(p) == 2 && p[1] > 0 {
			r.JoinTimes = append(r.JoinTimes, secs(p[0]))
		}
	}
	return nil
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func fromMiB(m float64) uint64 { return uint64(math.Round(m * (1 << 20))) }

// PerNode is count per joined node; 0 when none joined.
func (r *Result) PerNode(count uint64) float64 {
	if r.Joined == 0 {
		return 0
	}
	return float64(count) / float64(r.Joined)
}

// CPUUse is CPU / (Completion × Procs): the share of the process's CPUs the
// run used; 0 when not measured.
func (r *Result) CPUUse() float64 {
	if r.CPU <= 0 || r.Completion <= 0 || r.Procs <= 0 {
		return 0
	}
	return r.CPU.Seconds() / (r.Completion.Seconds() * float64(r.Procs))
}
