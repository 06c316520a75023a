package bench

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"time"
)

// Result is one model's figures for one run. Its JSON (cmd/bench -json)
// has each field under the key its tag names, a duration in the unit the
// key ends with (_s seconds, _ms milliseconds) and a byte count whose key
// ends with _mib in MiB; also attempts_per_node, requests_per_node and
// tls_handshakes_per_node, starved (Result.Starved, "" when not), and the
// timeline as [seconds, joined] pairs.
type Result struct {
	Model   string `json:"model"`
	Nodes   int    `json:"nodes"`
	LogN    int    `json:"logn"`
	Mode    Mode   `json:"mode"`
	Agent   string `json:"agent"` // the agent policy's name
	Servers int    `json:"servers"`
	LB      LB     `json:"lb"`

	// Joined is how many nodes joined before the run stopped.
	Joined int `json:"joined"`
	// Completion is the time from the start until the last node joined,
	// or until the run stopped (Stopped not empty).
	Completion time.Duration `json:"completion_s"`
	// LowerBound is the herd's measured lower bound (see
	// Herd.MeasureLowerBound), 0 if not measured; Ratio is Completion
	// over it, only a floor when the run stopped early.
	LowerBound time.Duration `json:"lower_bound_s"`
	Ratio      float64       `json:"ratio"`
	// RatioBatch is Completion over LowerBoundBatch, the bound with the
	// Verifier's scrypt in batches; 0 when not measured.
	LowerBoundBatch time.Duration `json:"lower_bound_batch_s,omitempty"`
	RatioBatch      float64       `json:"ratio_batch,omitempty"`
	// LocalBound is the lower bound estimated right before the run
	// (Scenario.BoundSample), plus, with the agents in the same process
	// over HTTPS, LocalTransport (Herd.EstimateTransport); LocalRatio is
	// Completion over it. All 0 if not asked for.
	LocalBound     time.Duration `json:"local_lower_bound_s,omitempty"`
	LocalTransport time.Duration `json:"local_transport_s,omitempty"`
	LocalRatio     float64       `json:"local_ratio,omitempty"`
	// Attempts, Requests and Handshakes count the agents' attempts
	// (agent.go), requests and TLS handshakes; Connections the servers'
	// accepted connections.
	Attempts    uint64 `json:"attempts"`
	Requests    uint64 `json:"requests"`
	Handshakes  uint64 `json:"tls_handshakes"`
	Connections uint64 `json:"server_connections"`
	// ScryptRuns counts the scrypt computations the servers started,
	// ScryptRunsPerNode per joined node, TokenScryptRuns those over join
	// tokens; the servers' hashing of their token at start is in none.
	ScryptRuns        uint64  `json:"scrypt_runs"`
	ScryptRunsPerNode float64 `json:"scrypt_runs_per_node"`
	TokenScryptRuns   uint64  `json:"token_scrypt_runs"`
	// Hung, Known and ValidCerts are the Scenario's.
	Hung       int  `json:"hung,omitempty"`
	Known      int  `json:"known,omitempty"`
	ValidCerts bool `json:"valid_certs,omitempty"`
	// Failovers and CertsRequested are what ClientPolicy agents reported.
	Failovers      uint64 `json:"failovers,omitempty"`
	CertsRequested uint64 `json:"certs_requested,omitempty"`
	// Reboot is Scenario.Reboot: the counts are then the measured
	// reboot's only, and Ratio is still to the cold lower bound.
	Reboot       Reboot `json:"reboot,omitempty"`
	DigestKey    bool   `json:"digest_key"`          // the servers had one
	FirstAttempt int    `json:"first_attempt_joins"` // nodes that joined on their first attempt
	// DigestHits and CacheHits count the matches answered without
	// scrypt, from a remembered digest or the result cache (k3s: 0).
	DigestHits uint64 `json:"digest_hits"`
	CacheHits  uint64 `json:"cache_hits"`
	// WarmupScrypt, Warmup and WarmupDigests are a reboot's warm-up: its
	// scrypt computations, its time, and the nodes with a remembered
	// digest after it. 0 for models that keep nothing.
	WarmupScrypt  uint64        `json:"warmup_scrypt"`
	Warmup        time.Duration `json:"warmup_s"`
	WarmupDigests int           `json:"warmup_digests"`
	// P50, P99 and Max are the join latencies of the nodes that joined,
	// retries included.
	P50 time.Duration `json:"p50_s"`
	P99 time.Duration `json:"p99_s"`
	Max time.Duration `json:"max_s"`
	// PeakHeap is the highest live heap sampled (/gc/heap/live:bytes),
	// PeakHeapObjects the highest heap in use (what the heap guard
	// watches), for the whole process. PeakMemory is the highest live
	// heap plus nodepass's scrypt buffers outside the heap
	// (HeapReading.OffHeap), sampled together: the figure the table
	// shows, since on Linux nodepass's buffers are not on the heap.
	PeakHeap        uint64 `json:"peak_heap_mib"`
	PeakHeapObjects uint64 `json:"peak_heap_objects_mib"`
	PeakMemory      uint64 `json:"peak_memory_mib"`
	// HeapBound is, for nodepass, the servers' ScryptBuffers plus 100
	// MiB for the rest, which PeakMemory stays within; 0 for the k3s
	// models.
	HeapBound uint64 `json:"heap_bound_mib,omitempty"`
	// Shed counts answers 429 or 503; ShedLate those that came after the
	// request had been held past LateShed; ShedAfterWait the requests a
	// nodepass server held on an estimate and then sent away.
	Shed          uint64 `json:"shed"`
	ShedLate      uint64 `json:"shed_late"`
	ShedAfterWait uint64 `json:"shed_after_wait"`
	// Returns has, for each node that joined on a later attempt than its
	// first, when that attempt came relative to its result being ready at
	// its server: negative, the agent waited; positive, the result did.
	// Only for models that keep a result (nodepass).
	Returns []time.Duration `json:"returns_s"`
	// LastReady is when the last node's result was ready (nodepass), or
	// Completion for models that keep none.
	LastReady time.Duration `json:"last_ready_s"`
	// ReachedFirst, ReachedMedian and ReachedLast are when the honest
	// nodes' first requests reached a server's model. A herd whose last
	// requests are sent away cannot end before ReachedLast plus the
	// agents' retry delay.
	ReachedFirst  time.Duration `json:"reached_first_s"`
	ReachedMedian time.Duration `json:"reached_median_s"`
	ReachedLast   time.Duration `json:"reached_last_s"`
	// IdlePending is the CPU time left unused until LastReady: Procs ×
	// LastReady minus the CPU time used.
	IdlePending time.Duration `json:"idle_pending_cpu_s"`
	// Timeouts, ConnErrors and Errors count the requests given up at the
	// client timeout, that did not reach a server, or answered 4xx or 500.
	Timeouts   uint64 `json:"timeouts"`
	ConnErrors uint64 `json:"conn_errors"`
	Errors     uint64 `json:"errors"`
	// CPU is the CPU time the process used during the run; against
	// Completion × Procs (GOMAXPROCS) it shows how much of the machine
	// the run got. 0 where it cannot be measured.
	CPU   time.Duration `json:"cpu_s"`
	Procs int           `json:"procs"`
	// CPUWait is how long the process's threads were ready to run but
	// waited for a CPU during the run, CPUWaitShare that wait over the
	// time they were ready (on a CPU or waiting), OthersCPUShare the
	// share of the time of the CPUs the process may run on that other
	// processes took; LoadMax is the machine's highest 1-minute load
	// average from the run's start to its end, MachineCPUs its online
	// CPUs. Starved reads them; all 0 where not measured (outside Linux).
	CPUWait        time.Duration `json:"cpu_wait_s"`
	CPUWaitShare   float64       `json:"cpu_wait_share"`
	OthersCPUShare float64       `json:"others_cpu_share"`
	LoadMax        float64       `json:"load_max"`
	MachineCPUs    int           `json:"machine_cpus"`
	// LowerBoundStarved is Herd.BoundStarved: why the lower bounds were
	// measured short of CPU (then too long, and Ratio too low), or "".
	LowerBoundStarved string `json:"lower_bound_starved"`
	// Split, for a split run, says where its agents and servers ran; CPU,
	// Procs, CPUWait and the heap figures are then the servers' process's.
	Split *Split `json:"split,omitempty"`
	// Stopped is empty when every node joined, else why the run stopped:
	// StoppedDeadline, StoppedHeapGuard or "cancelled: ..."; StopDetail
	// says it in words.
	Stopped    string `json:"stopped"`
	StopDetail string `json:"stop_detail,omitempty"`
	// ShedLog lists the answers counted in Shed, in time order.
	ShedLog []ShedEvent `json:"shed_log"`
	// JoinTimes are the joined nodes' join latencies, in order.
	JoinTimes []time.Duration `json:"-"`
	// Attack and Faults have the adversaries' and the store faults'
	// figures; nil without them.
	Attack *AttackResult `json:"attack,omitempty"`
	Faults *FaultResult  `json:"faults,omitempty"`
}

// ShedEvent is one answer 429 or 503 an agent got.
type ShedEvent struct {
	T          time.Duration `json:"t_s"`  // since the start of the run
	Node       int           `json:"node"` // the agent's index in the herd
	Server     int           `json:"server"`
	Status     int           `json:"status"`
	RetryAfter time.Duration `json:"retry_after_s"` // 0 when the answer had none
	Waited     time.Duration `json:"waited_s"`      // how long the request took until this answer
}

// Timeline returns joined nodes over time as [seconds, joined] pairs: a
// point at the start and one per join.
func (r *Result) Timeline() [][2]float64 {
	pts := make([][2]float64, 1, len(r.JoinTimes)+1)
	for i, t := range r.JoinTimes {
		pts = append(pts, [2]float64{t.Seconds(), float64(i + 1)})
	}
	return pts
}

// finish derives the figures that follow from the counts and the herd's
// lower bounds (x/crypto's, and this module's scrypt in batches; 0 when
// not measured).
func (r *Result) finish(lowerBound, lowerBoundBatch time.Duration) {
	r.LowerBound, r.LowerBoundBatch = lowerBound, lowerBoundBatch
	ratio := func(bound time.Duration) float64 {
		if bound <= 0 {
			return 0
		}
		return float64(r.Completion) / float64(bound)
	}
	r.Ratio, r.RatioBatch = ratio(lowerBound), ratio(lowerBoundBatch)
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

// MarshalJSON writes r as Result's doc says.
func (r Result) MarshalJSON() ([]byte, error) {
	return marshalUnits(r, struct {
		Attempts   float64      `json:"attempts_per_node"`
		Requests   float64      `json:"requests_per_node"`
		Handshakes float64      `json:"tls_handshakes_per_node"`
		Starved    string       `json:"starved"`
		Timeline   [][2]float64 `json:"timeline"`
	}{r.PerNode(r.Attempts), r.PerNode(r.Requests), r.PerNode(r.Handshakes), r.Starved(), r.Timeline()})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Result) UnmarshalJSON(b []byte) error {
	var j struct{ Timeline [][]float64 }
	if err := unmarshalUnits(b, r); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	for _, p := range j.Timeline {
		if len(p) == 2 && p[1] > 0 {
			r.JoinTimes = append(r.JoinTimes, time.Duration(math.Round(p[0]*float64(time.Second))))
		}
	}
	return nil
}

// MarshalJSON writes e with its tags' keys, durations in seconds.
func (e ShedEvent) MarshalJSON() ([]byte, error) { return marshalUnits(e, nil) }

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *ShedEvent) UnmarshalJSON(b []byte) error { return unmarshalUnits(b, e) }

// unit is what one of key's numbers stands for: nanoseconds for keys
// ending in _s and _ms, bytes for _mib; 0 for other keys, whose values
// are written as they are.
func unit(key string) float64 {
	switch {
	case strings.HasSuffix(key, "_s"):
		return float64(time.Second)
	case strings.HasSuffix(key, "_ms"):
		return float64(time.Millisecond)
	case strings.HasSuffix(key, "_mib"):
		return 1 << 20
	}
	return 0
}

// marshalUnits writes v, a struct, with its tags' keys: each
// time.Duration, []time.Duration and uint64 field whose key names a unit
// as a number of that unit, and a nil slice as an empty one; then the
// fields of extra, a struct, if not nil.
func marshalUnits(v, extra any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	view := reflect.New(unitView(rv.Type())).Elem()
	convertUnits(view, rv, true)
	b, err := json.Marshal(view.Interface())
	if err != nil || extra == nil {
		return b, err
	}
	e, err := json.Marshal(extra)
	return append(append(b[:len(b)-1], ','), e[1:]...), err
}

// unmarshalUnits sets the fields of the struct v points to from what
// marshalUnits wrote.
func unmarshalUnits(b []byte, v any) error {
	rv := reflect.ValueOf(v).Elem()
	view := reflect.New(unitView(rv.Type()))
	if err := json.Unmarshal(b, view.Interface()); err != nil {
		return err
	}
	convertUnits(rv, view.Elem(), false)
	return nil
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	durationsType = reflect.TypeFor[[]time.Duration]()
)

// unitView is t, a struct, with float64 in place of each field that
// marshalUnits writes in a unit, and []float64 for []time.Duration.
func unitView(t reflect.Type) reflect.Type {
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		switch key, _, _ := strings.Cut(f.Tag.Get("json"), ","); {
		case unit(key) == 0:
		case f.Type == durationType || f.Type.Kind() == reflect.Uint64:
			f.Type = reflect.TypeFor[float64]()
		case f.Type == durationsType:
			f.Type = reflect.TypeFor[[]float64]()
		}
		fields[i] = f
	}
	return reflect.StructOf(fields)
}

// convertUnits sets each field of dst from src's, one of them a unitView
// of the other's type: toView, into numbers of the field's unit, a nil
// slice as an empty one; else back.
func convertUnits(dst, src reflect.Value, toView bool) {
	for i := range dst.NumField() {
		d, s := dst.Field(i), src.Field(i)
		key, _, _ := strings.Cut(dst.Type().Field(i).Tag.Get("json"), ",")
		switch u := unit(key); {
		case d.Type() == s.Type():
			d.Set(s)
			if toView && d.Kind() == reflect.Slice && d.IsNil() {
				d.Set(reflect.MakeSlice(d.Type(), 0, 0))
			}
		case d.Kind() == reflect.Slice:
			if toView || !s.IsNil() {
				d.Set(reflect.MakeSlice(d.Type(), s.Len(), s.Len()))
			}
			for j := range s.Len() {
				convertUnit(d.Index(j), s.Index(j), u)
			}
		default:
			convertUnit(d, s, u)
		}
	}
}

// convertUnit sets d to s in units of u (d a float64), or from them
// (rounded to an integer).
func convertUnit(d, s reflect.Value, u float64) {
	switch {
	case d.Kind() == reflect.Float64 && s.CanInt():
		d.SetFloat(float64(s.Int()) / u)
	case d.Kind() == reflect.Float64:
		d.SetFloat(float64(s.Uint()) / u)
	case d.CanInt():
		d.SetInt(int64(math.Round(s.Float() * u)))
	default:
		d.SetUint(uint64(math.Round(s.Float() * u)))
	}
}
