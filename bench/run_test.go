package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeTarget answers the first request of each attempt (an in-process
// attempt: the seven authenticated requests) with answer, a function of
// the agent, the server and the agent's attempt number (1 for the first),
// and the others with later (nil: 200). It records which server each attempt
// went to.
type fakeTarget struct {
	answer func(ctx context.Context, agent, server, attempt int) outcome
	later  func(ctx context.Context, agent, server, attempt int) outcome
	mu     sync.Mutex
	seen   map[int][]int // agent -> servers asked, in order
}

func (f *fakeTarget) steps() []step { return inprocSteps }

func (f *fakeTarget) do(ctx context.Context, agent, server int, _ Node, s step, _ string) outcome {
	f.mu.Lock()
	if f.seen == nil {
		f.seen = make(map[int][]int)
	}
	if s == inprocSteps[0] {
		f.seen[agent] = append(f.seen[agent], server)
	}
	n := len(f.seen[agent])
	f.mu.Unlock()
	switch {
	case s == inprocSteps[0]:
		return f.answer(ctx, agent, server, n)
	case f.later != nil:
		return f.later(ctx, agent, server, n)
	}
	return outcome{status: http.StatusOK}
}

func (f *fakeTarget) close() {}

// runFake runs sc against f inside a synctest bubble, so that every
// duration in the result is exact.
func runFake(t *testing.T, sc Scenario, f *fakeTarget) *Result {
	t.Helper()
	sc = sc.WithDefaults()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	var res *Result
	synctest.Test(t, func(t *testing.T) {
		r := newRun(sc, fakeNodes(sc.Nodes), fakeToken)
		r.target = f
		smp := newSampler(sc)
		r.halt = smp.guard.done
		start := time.Now()
		smp.begin(start)
		res = r.execute(t.Context(), start)
		smp.end(res)
		res.finish(10*time.Second, 0)
	})
	return res
}

// fakeToken is the join token of fake runs.
const fakeToken = "fake-join-token"

// fakeNodes returns n nodes with names and passwords, for fake targets.
func fakeNodes(n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i] = Node{Name: fmt.Sprintf("node-%04d", i+1), Password: fmt.Sprintf("password-%d", i)}
	}
	return nodes
}

func shedOnce(retryAfter time.Duration) func(context.Context, int, int, int) outcome {
	return func(_ context.Context, _, _, attempt int) outcome {
		if attempt == 1 {
			return outcome{status: http.StatusServiceUnavailable, retryAfter: retryAfter}
		}
		return outcome{status: http.StatusOK}
	}
}

func TestBackoffAgentHonoursRetryAfter(t *testing.T) {
	res := runFake(t, Scenario{Nodes: 20, Agent: BackoffPolicy{Base: time.Second, Cap: 30 * time.Second}},
		&fakeTarget{answer: shedOnce(3 * time.Second)})
	if res.Joined != 20 || res.Stopped != "" {
		t.Fatalf("joined %d, stopped %q", res.Joined, res.Stopped)
	}
	for _, d := range res.JoinTimes {
		if d != 3*time.Second {
			t.Fatalf("a node joined at %v, want 3s (its Retry-After)", d)
		}
	}
	if res.Attempts != 40 || res.Shed != 20 || res.Timeouts != 0 {
		t.Errorf("attempts %d shed %d timeouts %d, want 40 20 0", res.Attempts, res.Shed, res.Timeouts)
	}
	if res.Completion != 3*time.Second || res.P50 != 3*time.Second || res.Max != 3*time.Second {
		t.Errorf("completion %v p50 %v max %v, want 3s", res.Completion, res.P50, res.Max)
	}
	if res.Ratio != 0.3 {
		t.Errorf("ratio %v, want 3s / 10s", res.Ratio)
	}
	if len(res.ShedLog) != 20 {
		t.Fatalf("%d shed events, want 20", len(res.ShedLog))
	}
	for _, e := range res.ShedLog {
		if e.T != 0 || e.Status != http.StatusServiceUnavailable || e.RetryAfter != 3*time.Second {
			t.Errorf("shed event %+v, want a 503 at 0 with Retry-After 3s", e)
		}
	}
}

func TestJitterAgentIgnoresRetryAfter(t *testing.T) {
	res := runFake(t, Scenario{Nodes: 50}, &fakeTarget{answer: shedOnce(time.Second)})
	if res.Joined != 50 {
		t.Fatalf("joined %d", res.Joined)
	}
	for _, d := range res.JoinTimes {
		if d < 5*time.Second || d >= 10*time.Second {
			t.Fatalf("a node joined at %v, want within [5s, 10s)", d)
		}
	}
	if !slices.IsSorted(res.JoinTimes) {
		t.Error("join times not sorted")
	}
	if res.JoinTimes[0] == res.JoinTimes[len(res.JoinTimes)-1] {
		t.Error("jitter did not spread the retries")
	}
}

func TestFixedAgentAfterClientTimeout(t *testing.T) {
	hang := func(ctx context.Context, _, _, attempt int) outcome {
		if attempt == 1 {
			<-ctx.Done() // a server that never answers
			return outcome{timeout: true}
		}
		return outcome{status: http.StatusOK}
	}
	res := runFake(t, Scenario{Nodes: 10, Agent: JitterPolicy{Min: 5 * time.Second, Max: 5 * time.Second}}, &fakeTarget{answer: hang})
	if res.Joined != 10 || res.Timeouts != 10 || res.Attempts != 20 {
		t.Fatalf("joined %d timeouts %d attempts %d, want 10 10 20", res.Joined, res.Timeouts, res.Attempts)
	}
	if res.Completion != 15*time.Second {
		t.Errorf("completion %v, want 10s timeout + 5s", res.Completion)
	}
}

func TestTimeScale(t *testing.T) {
	hang := func(ctx context.Context, _, _, attempt int) outcome {
		if attempt == 1 {
			<-ctx.Done()
			return outcome{timeout: true}
		}
		return outcome{status: http.StatusOK}
	}
	res := runFake(t, Scenario{Nodes: 3, Agent: JitterPolicy{Min: 5 * time.Second, Max: 5 * time.Second}, TimeScale: 0.01}, &fakeTarget{answer: hang})
	if res.Completion != 150*time.Millisecond {
		t.Errorf("completion %v, want (10s + 5s) * 0.01", res.Completion)
	}
}

// refuseServer0 sheds every request to server 0 and lets the others in.
func refuseServer0(_ context.Context, _, server, _ int) outcome {
	if server == 0 {
		return outcome{status: http.StatusTooManyRequests}
	}
	return outcome{status: http.StatusOK}
}

func TestFailoverMovesOnAfterShed(t *testing.T) {
	f := &fakeTarget{answer: refuseServer0}
	res := runFake(t, Scenario{Nodes: 30, Servers: 3, LB: LBFailover}, f)
	if res.Joined != 30 || res.Shed != 10 {
		t.Fatalf("joined %d shed %d, want 30 10", res.Joined, res.Shed)
	}
	for agent, servers := range f.seen {
		if agent%3 == 0 && !slices.Equal(servers, []int{0, 1}) {
			t.Errorf("agent %d asked servers %v, want [0 1]", agent, servers)
		}
	}
}

func TestStickyStaysAfterShed(t *testing.T) {
	f := &fakeTarget{answer: refuseServer0}
	res := runFake(t, Scenario{Nodes: 30, Servers: 3, LB: LBSticky, Deadline: time.Minute}, f)
	if res.Joined != 20 || res.Stopped != StoppedDeadline || res.Completion != time.Minute {
		t.Fatalf("joined %d stopped %q after %v, want 20 %q after 1m", res.Joined, res.Stopped, res.Completion, StoppedDeadline)
	}
	for _, servers := range f.seen {
		if servers[0] == 0 && slices.Max(servers) != 0 {
			t.Fatalf("a sticky agent left server 0 after a 429: %v", servers)
		}
	}
}

func TestStickyMovesOnConnectionError(t *testing.T) {
	f := &fakeTarget{answer: func(_ context.Context, _, server, _ int) outcome {
		if server == 0 {
			return outcome{connErr: true}
		}
		return outcome{status: http.StatusOK}
	}}
	res := runFake(t, Scenario{Nodes: 6, Servers: 2}, f)
	if res.Joined != 6 || res.ConnErrors != 3 {
		t.Fatalf("joined %d conn errors %d, want 6 3", res.Joined, res.ConnErrors)
	}
}

func TestHeapGuardStopsRun(t *testing.T) {
	runtime.GC() // so that the live-heap metric is set
	hang := func(ctx context.Context, _, _, _ int) outcome {
		<-ctx.Done()
		return outcome{timeout: true}
	}
	res := runFake(t, Scenario{Nodes: 5, MaxHeap: 1}, &fakeTarget{answer: hang})
	if res.Stopped != StoppedHeapGuard || res.Joined != 0 || res.PeakHeap <= 1 {
		t.Fatalf("stopped %q joined %d peak %d", res.Stopped, res.Joined, res.PeakHeap)
	}
	if res.Timeouts != 0 {
		t.Errorf("%d timeouts counted for requests the run itself ended", res.Timeouts)
	}
}

// TestHeapGuardNoDrain checks that a run that will not wait for its
// agents to wind down still reports the stop.
func TestHeapGuardNoDrain(t *testing.T) {
	runtime.GC()
	hang := func(ctx context.Context, _, _, _ int) outcome {
		<-ctx.Done()
		return outcome{timeout: true}
	}
	res := runFake(t, Scenario{Nodes: 5, MaxHeap: 1, NoDrain: true}, &fakeTarget{answer: hang})
	if res.Stopped != StoppedHeapGuard || res.Joined != 0 || res.StopDetail == "" {
		t.Fatalf("stopped %q (%s) joined %d", res.Stopped, res.StopDetail, res.Joined)
	}
	// The detail names the measure the guard watches, which the tables
	// print apart from the live heap (issue 45).
	if !strings.HasPrefix(res.StopDetail, "the heap in use passed the 0 MiB guard (peak heap in use ") {
		t.Errorf("stop detail %q", res.StopDetail)
	}
}

func TestProgress(t *testing.T) {
	var mu sync.Mutex
	var calls []Progress
	sc := Scenario{Nodes: 4, Progress: func(p Progress) {
		mu.Lock()
		calls = append(calls, p)
		mu.Unlock()
	}}
	runFake(t, sc, &fakeTarget{answer: shedOnce(0)})
	last := calls[len(calls)-1]
	if !last.Done || last.Joined != 4 || last.Nodes != 4 {
		t.Errorf("last progress %+v", last)
	}
	if len(calls) < 50 { // 5-10 s at one call per 100 ms
		t.Errorf("%d progress calls over a run of at least 5 s", len(calls))
	}
}

func TestResultJSON(t *testing.T) {
	r := &Result{
		Model: ModelNodepass, Nodes: 3, Joined: 2, Completion: 1500 * time.Millisecond,
		ScryptRuns: 2, PeakHeap: 96 << 20, Stopped: StoppedDeadline,
		JoinTimes:    []time.Duration{500 * time.Millisecond, time.Second},
		ShedLog:      []ShedEvent{{T: time.Second, Node: 2, Server: 1, Status: 503, RetryAfter: 2 * time.Second}},
		ReachedFirst: 100 * time.Millisecond, ReachedMedian: 250 * time.Millisecond, ReachedLast: 500 * time.Millisecond,
		Split:   &Split{AgentCPUs: []int{0}, ServerCPUs: []int{1, 2}, AgentProcs: 1, ServerProcs: 2, AgentCPU: 2 * time.Second},
		CPUWait: 250 * time.Millisecond, CPUWaitShare: 0.25, OthersCPUShare: 0.5, LoadMax: 2.5, MachineCPUs: 4,
	}
	r.finish(time.Second, 500*time.Millisecond)
	r.SetLocalBound(2*time.Second, time.Second)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model": "nodepass", "nodes": 3.0, "joined": 2.0, "completion_s": 1.5, "lower_bound_s": 1.0,
		"ratio": 1.5, "attempts": 0.0, "scrypt_runs": 2.0, "p50_s": 0.5, "p99_s": 1.0, "max_s": 1.0,
		"peak_heap_mib": 96.0, "shed": 0.0, "timeouts": 0.0, "stopped": "deadline",
		"local_lower_bound_s": 3.0, "local_transport_s": 1.0, "local_ratio": 0.5,
		"reached_first_s": 0.1, "reached_median_s": 0.25, "reached_last_s": 0.5,
		"lower_bound_batch_s": 0.5, "ratio_batch": 3.0,
		"cpu_wait_s": 0.25, "cpu_wait_share": 0.25, "others_cpu_share": 0.5, "load_max": 2.5, "machine_cpus": 4.0,
		"starved": "short of CPU: the servers' threads waited for a CPU 25% of the time they were ready to run, " +
			"and other processes took 50% of their CPUs; on a quiet machine its time would be shorter",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if sp, _ := m["split"].(map[string]any); sp["agent_cpu_s"] != 2.0 || sp["server_procs"] != 2.0 || len(sp["server_cpus"].([]any)) != 2 {
		t.Errorf("split = %v", m["split"])
	}
	if tl, _ := m["timeline"].([]any); len(tl) != 3 {
		t.Errorf("timeline %v, want 3 points", m["timeline"])
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.ShedLog, r.ShedLog) {
		t.Errorf("shed log round trip: %+v, want %+v", back.ShedLog, r.ShedLog)
	}
	if !slices.Equal(back.JoinTimes, r.JoinTimes) || back.Completion != r.Completion || back.PeakHeap != r.PeakHeap ||
		back.ReachedFirst != r.ReachedFirst || back.ReachedMedian != r.ReachedMedian || back.ReachedLast != r.ReachedLast ||
		back.LowerBoundBatch != r.LowerBoundBatch || back.RatioBatch != r.RatioBatch ||
		back.CPUWait != r.CPUWait || back.CPUWaitShare != r.CPUWaitShare || back.OthersCPUShare != r.OthersCPUShare ||
		back.LoadMax != r.LoadMax || back.MachineCPUs != r.MachineCPUs ||
		back.Split.AgentCPU != r.Split.AgentCPU || !slices.Equal(back.Split.ServerCPUs, r.Split.ServerCPUs) {
		t.Errorf("round trip: %+v, want %+v", back, *r)
	}
	// A value marshals the same as a pointer.
	if b2, _ := json.Marshal(*r); string(b2) != string(b) {
		t.Error("Result value and pointer marshal differently")
	}
}

func TestTimeline(t *testing.T) {
	r := &Result{JoinTimes: []time.Duration{time.Second, 2 * time.Second}}
	want := [][2]float64{{0, 0}, {1, 1}, {2, 2}}
	if got := r.Timeline(); !slices.Equal(got, want) {
		t.Errorf("Timeline() = %v, want %v", got, want)
	}
}

func TestRank(t *testing.T) {
	for _, c := range []struct {
		n    int
		q    float64
		want int
	}{{1, 0.5, 0}, {1, 0.99, 0}, {2, 0.5, 0}, {100, 0.5, 49}, {100, 0.99, 98}, {320, 0.99, 316}} {
		if got := rank(c.n, c.q); got != c.want {
			t.Errorf("rank(%d, %v) = %d, want %d", c.n, c.q, got, c.want)
		}
	}
}

// TestReadHeap: the heap metrics exist in this runtime, and the heap
// objects count a large allocation while it is live.
func TestReadHeap(t *testing.T) {
	runtime.GC() // the live heap is 0 until a cycle has ended
	before := ReadHeap()
	if before.Objects == 0 || before.Live == 0 {
		t.Fatalf("ReadHeap() = %+v: a metric is missing", before)
	}
	buf := make([]byte, 64<<20)
	after := ReadHeap()
	runtime.KeepAlive(buf)
	if after.Objects < before.Objects+32<<20 {
		t.Errorf("heap objects %d after a 64 MiB allocation, %d before", after.Objects, before.Objects)
	}
	runtime.GC()
	if got := ReadHeap().GCCycles; got <= before.GCCycles {
		t.Errorf("GC cycles %d after runtime.GC, %d before", got, before.GCCycles)
	}
}
