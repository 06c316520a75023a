package pprofreport

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/verify"
)

// sample is one kind of sample in a synthetic profile: its frames, the
// leaf first, as runtime/pprof names the functions, and its labels.
type sample struct {
	frames []string
	labels map[string][]string
}

// The labels verify sets.
var (
	scryptLabel  = map[string][]string{verify.ProfileLabel: {verify.ProfileScrypt}}
	requestLabel = map[string][]string{verify.ProfileLabel: {verify.ProfileRequest}}
)

// The frames of a scrypt computation, from the scrypt loop down to verify.
var scryptFrames = []string{
	"golang.org/x/crypto/scrypt.salsaXOR", "golang.org/x/crypto/scrypt.blockMix", "golang.org/x/crypto/scrypt.smix",
	"golang.org/x/crypto/scrypt.Key", "github.com/nodepass/nodepass/verify.CompareHashAndPassword",
}

// Stacks for synthetic profiles, as a profile made under verify's labels
// has them.
var (
	scryptStack = sample{scryptFrames, scryptLabel}
	// zeroStack is the runtime zeroing scrypt's buffer, on the
	// computation's goroutine.
	zeroStack = sample{[]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "runtime.makeslice", "golang.org/x/crypto/scrypt.Key",
		"github.com/nodepass/nodepass/verify.CompareHashAndPassword"}, scryptLabel}
	// assistStack is a GC assist paid by a computation's allocation.
	assistStack = sample{[]string{"runtime.scanobject", "runtime.gcDrainN", "runtime.gcAssistAlloc1", "runtime.gcAssistAlloc",
		"runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"}, scryptLabel}
	// waitStack is a request that missed the cache, queueing.
	waitStack = sample{[]string{"sync.(*Mutex).Lock", "github.com/nodepass/nodepass/verify.(*Verifier).Verify"}, requestLabel}
	// cacheStack is a cache hit's key: HMAC-SHA256.
	cacheStack = sample{[]string{
		"crypto/internal/fips140/sha256.blockAVX2", "crypto/internal/fips140/hmac.(*HMAC).Sum",
		"github.com/nodepass/nodepass/cache.(*keyer).key", "github.com/nodepass/nodepass/cache.(*Cache).Key",
		"github.com/nodepass/nodepass/verify.(*Verifier).Verify",
	}, nil}
	gcStack    = sample{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker.func2", "runtime.systemstack", "runtime.gcBgMarkWorker"}, nil}
	schedStack = sample{[]string{"runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.schedule"}, nil}
	agentStack = sample{[]string{"github.com/nodepass/nodepass/bench.(*run).agent", "github.com/nodepass/nodepass/bench.(*run).execute.func2"}, nil}
)

// unlabelled returns s without its labels, as in a profile made before
// them.
func unlabelled(s sample) sample { return sample{s.frames, nil} }

// cpuSpec is a synthetic CPU profile: samples (10 ms each) per stack.
type cpuSpec map[*sample]int64

// builder makes profiles whose functions and locations are shared
// between samples, as real ones are.
type builder struct {
	p     *profile.Profile
	funcs map[string]*profile.Function
}

func newBuilder(sampleTypes ...*profile.ValueType) *builder {
	return &builder{p: &profile.Profile{SampleType: sampleTypes}, funcs: map[string]*profile.Function{}}
}

func (b *builder) location(name string) *profile.Location {
	f, ok := b.funcs[name]
	if !ok {
		f = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name}
		b.funcs[name] = f
		b.p.Function = append(b.p.Function, f)
	}
	loc := &profile.Location{ID: uint64(len(b.p.Location) + 1), Line: []profile.Line{{Function: f, Line: 1}}}
	b.p.Location = append(b.p.Location, loc)
	return loc
}

func (b *builder) sample(frames []string, values ...int64) *profile.Sample {
	s := &profile.Sample{Value: values, Label: map[string][]string{}}
	for _, f := range frames {
		s.Location = append(s.Location, b.location(f))
	}
	b.p.Sample = append(b.p.Sample, s)
	return s
}

// roundTrip writes p and parses it back, as a file would be.
func roundTrip(t *testing.T, p *profile.Profile) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	q, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// cpuProfile builds a CPU profile at 100 Hz from spec.
func cpuProfile(t *testing.T, spec cpuSpec) *profile.Profile {
	t.Helper()
	const period = int64(10 * time.Millisecond)
	b := newBuilder(&profile.ValueType{Type: "samples", Unit: "count"}, &profile.ValueType{Type: "cpu", Unit: "nanoseconds"})
	b.p.PeriodType = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}
	b.p.Period = period
	b.p.DurationNanos = int64(5 * time.Second)
	for st, n := range spec {
		if n > 0 {
			s := b.sample(st.frames, n, n*period)
			for k, v := range st.labels {
				s.Label[k] = v
			}
		}
	}
	return roundTrip(t, b.p)
}

// herd is a synthetic run: a report of spec for model nodepass, whose
// nodes all joined, with calls scrypt calls.
func herd(t *testing.T, spec cpuSpec, nodes int, calls int64) *Report {
	t.Helper()
	r, err := FromProfile(cpuProfile(t, spec), bench.ModelNodepass)
	if err != nil {
		t.Fatal(err)
	}
	res := &bench.Result{Model: bench.ModelNodepass, Nodes: nodes, Joined: nodes, ScryptRuns: uint64(calls)}
	res.ScryptRunsPerNode = float64(calls) / float64(nodes)
	if !r.AttachRun([]*bench.Result{{Model: "other"}, res}) {
		t.Fatal("AttachRun found no result for nodepass")
	}
	return r
}

// healthy is a herd of 200 nodes: one scrypt (1 sample of 10 ms, and
// one in 8 nodes a sample of zeroing its buffer) per node, and a little
// of everything else.
func healthy() cpuSpec {
	return cpuSpec{&scryptStack: 200, &zeroStack: 25, &cacheStack: 1, &gcStack: 20, &schedStack: 10, &agentStack: 4}
}
