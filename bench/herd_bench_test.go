package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
)

// benchLogN is the scrypt cost of BenchmarkHerd's stored hashes: the
// -herd.logn flag, else $NODEPASS_BENCH_LOGN, else 10, which keeps
// -benchtime=1x quick. k3s uses 15.
var benchLogN = flag.Int("herd.logn", envInt("NODEPASS_BENCH_LOGN", 10), "scrypt logN of BenchmarkHerd's stored hashes (k3s: 15)")

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

var (
	benchHerdsMu sync.Mutex
	benchHerds   = map[int]*Herd{}
)

// benchHerd returns a herd of n nodes at benchLogN, made once per process
// and outside any benchmark's timer.
func benchHerd(b *testing.B, n int) *Herd {
	benchHerdsMu.Lock()
	defer benchHerdsMu.Unlock()
	if h, ok := benchHerds[n]; ok {
		return h
	}
	h, err := NewHerd(context.Background(), n, *benchLogN)
	if err != nil {
		b.Fatal(err)
	}
	benchHerds[n] = h
	return h
}

// BenchmarkHerd answers the project's main question: when a whole herd of
// nodes reboots at once, how long does each server model take until every
// node has joined, compared with the lower bound measured in the same
// process right before (x-lower-bound), how much scrypt work does it spend
// per node of the herd (scrypt-runs/node), and at what rate do nodes join
// (joined/s)? A model that cannot finish reports joined-% below 100 and
// its ratio is taken at its deadline.
//
// It runs in-process (ModeInproc) with k3s's agents (jitter 5-10 s, 10 s
// client timeout). Every duration is scaled by 2^(logN-15), so that a
// small logN keeps the proportions of the logN 15 herd (one scrypt : the
// client timeout : the retry interval) at a fraction of the cost; set
// -herd.logn=15 for the real thing. ns/op is one whole herd, including the
// wait for work an unbounded model still has running when it stops.
func BenchmarkHerd(b *testing.B) {
	for _, model := range Models() {
		b.Run("model="+model, func(b *testing.B) {
			for _, nodes := range []int{100, 320} {
				b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
					benchmarkHerd(b, Scenario{Nodes: nodes}, model)
				})
			}
		})
	}
}

// BenchmarkHerdServers answers: with three servers sharing one store and
// the same CPUs, what do the agents' load balancers do for the herd, and
// how much duplicate scrypt work do separate caches cost? Fast shedding
// (nodepass's 503, k3s-latest's 429) lets failover agents move on at once;
// sticky agents stay. Agents back off (full jitter, honouring
// Retry-After).
func BenchmarkHerdServers(b *testing.B) {
	backoff, _ := ParsePolicy(PolicyBackoff)
	for _, model := range []string{ModelK3sLatest, ModelNodepass} {
		b.Run("model="+model, func(b *testing.B) {
			for _, lb := range []LB{LBSticky, LBFailover} {
				b.Run("lb="+string(lb), func(b *testing.B) {
					benchmarkHerd(b, Scenario{Nodes: 320, Servers: 3, LB: lb, Agent: backoff}, model)
				})
			}
		})
	}
}

func benchmarkHerd(b *testing.B, sc Scenario, model string) {
	h := benchHerd(b, sc.Nodes)
	// The lower bound is measured again right before each benchmark, so
	// that the ratio compares two figures taken under the same load.
	if err := h.MeasureLowerBound(context.Background()); err != nil {
		b.Fatal(err)
	}
	sc.LogN = *benchLogN
	sc.TimeScale = math.Exp2(float64(sc.LogN - 15))
	b.ReportAllocs()
	var ratio, runsPerNode, joined, completion float64
	n := 0
	for b.Loop() {
		res, err := Run(context.Background(), sc, h, model)
		if err != nil {
			b.Fatal(err)
		}
		n++
		ratio += res.Ratio
		runsPerNode += float64(res.ScryptRuns) / float64(sc.Nodes)
		joined += float64(res.Joined)
		completion += res.Completion.Seconds()
	}
	f := float64(n)
	b.ReportMetric(ratio/f, "x-lower-bound")
	b.ReportMetric(runsPerNode/f, "scrypt-runs/node")
	b.ReportMetric(100*joined/f/float64(sc.Nodes), "joined-%")
	b.ReportMetric(joined/completion, "joined/s")
	b.ReportMetric(h.LowerBound.Seconds(), "lower-bound-s")
}
