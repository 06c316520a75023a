// Package pprofreport says where the CPU of a herd run went, from the CPU
// profile cmd/bench writes per server model: the share of the scrypt work,
// of the module's own code (the cache-miss request path, cache, httpauth,
// verify), of TLS/HTTP, the garbage collector, the rest of the runtime and
// everything else (Classify gives the rules: by the pprof labels verify
// and bench set, and by package paths); scrypt CPU per joined node,
// in units of one scrypt's CPU in the same run (the scrypt calls counted
// in the run's heap profile) and of one scrypt measured right before it;
// and the top functions. It compares two profiles (WriteDiff) and checks
// one against limits and a baseline (Check).
//
// It reads profiles with github.com/google/pprof/profile only; it never
// runs go tool pprof.
package pprofreport

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/verify"
)

// Report is what one CPU profile shows. Make one with FromProfile or
// ReadFile; AttachRun adds the run's figures that per-node values need.
type Report struct {
	// Name is the server model the profile covers (from its Meta, else
	// its file name).
	Name string
	// File is where the profile was read from; empty for FromProfile.
	File string
	// Meta is what cmd/bench recorded in the profile's comments; zero if
	// nothing.
	Meta Meta
	// Samples counts the profile's samples; Period is the time one
	// stands for (1/Hz); Total is the CPU time they add up to.
	Samples int64
	Period  time.Duration
	Total   time.Duration
	// Duration is the wall time the profile covers.
	Duration time.Duration
	// CPU and Count are the CPU time and the samples per Category.
	CPU   [numCategories]time.Duration
	Count [numCategories]int64
	// UnderScrypt is the CPU of the Scrypt category and of every other
	// sample with a scrypt frame anywhere in its stack. In a profile made
	// under the labels it is the Scrypt category; in one made before them
	// it adds the runtime work below scrypt (allocating and zeroing its
	// buffer).
	UnderScrypt time.Duration
	// ScryptLabelled is the CPU of the samples labelled
	// nodepass.verify=scrypt: all of the Scrypt category when every
	// scrypt call ran under the label, none in a profile made before it.
	ScryptLabelled time.Duration
	// ScryptBy splits the Scrypt category by whose password the work
	// checked, by the bench.PasswordLabel label of a run with attackers
	// or duplicates ("honest", "guess", "duplicate"); nil when no scrypt
	// sample carried it.
	ScryptBy map[string]time.Duration
	// Preempted is the CPU of the samples whose leaf was
	// runtime.asyncPreempt, counted in the function the runtime had
	// interrupted (see Classify).
	Preempted time.Duration
	// Flat and Cum are the functions by CPU, highest first: the CPU spent
	// in the function itself, and in it or anything it called.
	Flat, Cum []FuncCPU
	// Run is the model's figures from the run's JSON; nil until AttachRun.
	Run *bench.Result
	// ScryptCalls is how many scrypt computations the run made, counted
	// in its heap profile (see ScryptCalls), and ScryptBuffer the bytes
	// each allocated; HaveCalls is false until AttachHeap.
	ScryptCalls  int64
	ScryptBuffer int64
	HaveCalls    bool
}

// FuncCPU is one function's CPU time in a profile.
type FuncCPU struct {
	Name string
	CPU  time.Duration
}

// FromProfile reads a CPU profile (sample types samples/count and
// cpu/nanoseconds, as runtime/pprof writes them). name is used when the
// profile's comments do not say which model it covers.
func FromProfile(p *profile.Profile, name string) (*Report, error) {
	cpuIdx, countIdx := -1, -1
	for i, st := range p.SampleType {
		switch {
		case st.Type == "cpu" && st.Unit == "nanoseconds":
			cpuIdx = i
		case st.Type == "samples" && st.Unit == "count":
			countIdx = i
		}
	}
	if cpuIdx < 0 {
		return nil, errors.New("pprofreport: not a CPU profile (no cpu/nanoseconds sample type)")
	}
	r := &Report{Name: name, Period: time.Duration(p.Period), Duration: time.Duration(p.DurationNanos)}
	if m, ok := ParseMeta(p.Comments); ok {
		r.Meta = m
		if m.Model != "" {
			r.Name = m.Model
		}
	}
	flat, cum := map[string]time.Duration{}, map[string]time.Duration{}
	var buf []string
	seen := map[string]bool{}
	for _, s := range p.Sample {
		v := time.Duration(s.Value[cpuIdx])
		n := int64(1)
		if countIdx >= 0 {
			n = s.Value[countIdx]
		}
		buf = stack(s, buf)
		frames, preempted := skipPreempt(buf)
		if preempted {
			r.Preempted += v
		}
		c := Classify(frames, s.Label)
		if c == Scrypt {
			if label(s.Label, verify.ProfileLabel) == verify.ProfileScrypt {
				r.ScryptLabelled += v
			}
			if who := label(s.Label, bench.PasswordLabel); who != "" {
				if r.ScryptBy == nil {
					r.ScryptBy = map[string]time.Duration{}
				}
				r.ScryptBy[who] += v
			}
		}
		r.CPU[c] += v
		r.Count[c] += n
		r.Total += v
		r.Samples += n
		if len(frames) == 0 {
			continue
		}
		flat[frames[0]] += v
		clear(seen)
		under := c == Scrypt
		for _, f := range frames {
			if !seen[f] {
				seen[f] = true
				cum[f] += v
			}
			under = under || pkgOf(f) == scryptPkg
		}
		if under {
			r.UnderScrypt += v
		}
	}
	r.Flat, r.Cum = sortFuncs(flat), sortFuncs(cum)
	return r, nil
}

func sortFuncs(m map[string]time.Duration) []FuncCPU {
	out := make([]FuncCPU, 0, len(m))
	for name, d := range m {
		out = append(out, FuncCPU{name, d})
	}
	slices.SortFunc(out, func(a, b FuncCPU) int {
		return cmp.Or(cmp.Compare(b.CPU, a.CPU), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// ReadFile reads the CPU profile at path. The model's name is taken from
// the profile's comments, else from the file name (MODEL.cpu.pprof).
func ReadFile(path string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: reading %s: %w", path, err)
	}
	name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".pprof"), ".cpu")
	r, err := FromProfile(p, name)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: %s: %s", path, strings.TrimPrefix(err.Error(), "pprofreport: "))
	}
	r.File = path
	return r, nil
}

// Load reads the CPU profile at path with what the same run left beside
// it: the model's heap profile (MODEL.heap.pprof, for the scrypt calls)
// and the run's figures from jsonPath, or from herd.json in the profile's
// directory when jsonPath is empty. Whatever is missing beside the profile
// is left out of the report, which says so; a jsonPath given that cannot
// be read, or that has no result for the model, is an error.
func Load(path, jsonPath string) (*Report, error) {
	r, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	heapPath := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".cpu.pprof")+".heap.pprof")
	if _, err := os.Stat(heapPath); err == nil && heapPath != path {
		if err := r.ReadHeapFile(heapPath); err != nil {
			return nil, err
		}
	}
	explicit := jsonPath != ""
	if !explicit {
		jsonPath = filepath.Join(dir, "herd.json")
		if _, err := os.Stat(jsonPath); err != nil {
			return r, nil
		}
	}
	results, err := ReadResults(jsonPath)
	if err != nil {
		return nil, err
	}
	if !r.AttachRun(results) && explicit {
		return nil, fmt.Errorf("pprofreport: %s has no result for model %q (profile %s)", jsonPath, r.Name, path)
	}
	return r, nil
}

// ReadResults reads the JSON that cmd/bench -json writes: an array of
// results, one per model.
func ReadResults(path string) ([]*bench.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: %w", err)
	}
	var results []*bench.Result
	if err := json.Unmarshal(b, &results); err != nil {
		return nil, fmt.Errorf("pprofreport: reading %s: %w", path, err)
	}
	return results, nil
}

// AttachRun sets r.Run to the result for r's model in results, and
// reports whether there was one.
func (r *Report) AttachRun(results []*bench.Result) bool {
	for _, res := range results {
		if res != nil && res.Model == r.Name {
			r.Run = res
			return true
		}
	}
	return false
}

// Share returns the share of the sampled CPU in the categories given.
func (r *Report) Share(cs ...Category) float64 {
	if r.Total <= 0 {
		return 0
	}
	var d time.Duration
	for _, c := range cs {
		d += r.CPU[c]
	}
	return float64(d) / float64(r.Total)
}

// OwnShare returns the share of the module's own code.
func (r *Report) OwnShare() float64 { return r.Share(OwnCode()...) }

// count returns the samples in the categories given.
func (r *Report) count(cs ...Category) int64 {
	var n int64
	for _, c := range cs {
		n += r.Count[c]
	}
	return n
}

// ScryptPerNode returns the scrypt work's CPU per joined node; ok is
// false without the run's figures or when no node joined.
func (r *Report) ScryptPerNode() (d time.Duration, ok bool) {
	if r.Run == nil || r.Run.Joined == 0 {
		return 0, false
	}
	return r.CPU[Scrypt] / time.Duration(r.Run.Joined), true
}

// OneScryptInRun returns one scrypt's CPU in the run itself: the scrypt
// work's CPU over the scrypt calls counted in the run's heap profile.
// ok is false without the heap profile or when it counted no call.
func (r *Report) OneScryptInRun() (d time.Duration, ok bool) {
	calls, ok := r.Calls()
	if !ok {
		return 0, false
	}
	return r.CPU[Scrypt] / time.Duration(calls), true
}

// Calls returns the scrypt calls of the run: as counted in its heap
// profile when that counted any, otherwise as the model counted them
// (Result.ScryptRuns). A scrypt that reuses its buffers (this module's
// scrypt package, nodepass's default) allocates none per call, so the
// heap profile cannot count its calls; x/crypto's can.
func (r *Report) Calls() (int64, bool) {
	if r.HaveCalls && r.ScryptCalls > 0 {
		return r.ScryptCalls, true
	}
	if r.Run != nil && r.Run.ScryptRuns > 0 {
		return int64(r.Run.ScryptRuns), true
	}
	return 0, false
}

// PerNode returns ScryptPerNode in units of OneScryptInRun: how many
// scrypts of CPU each joined node cost, one scrypt measured in the same
// run over the same time. The CPU time cancels out, so this is the scrypt
// calls per joined node as Calls counts them, a figure no
// change in the machine's speed or load can move. ok is false when either
// is unknown.
func (r *Report) PerNode() (ratio float64, ok bool) {
	calls, ok := r.Calls()
	if r.Run == nil || r.Run.Joined == 0 || !ok {
		return 0, false
	}
	return float64(calls) / float64(r.Run.Joined), true
}

// PerNodeVsBound returns ScryptPerNode over one scrypt's CPU measured by
// profiling the lower-bound sample right before the run (Meta.OneScrypt).
// It needs no heap profile, but the two CPU times are taken seconds apart:
// on a shared machine the CPU time of one scrypt varies by ±20% from one
// second to the next, and so does this ratio. ok is false when either is
// unknown.
func (r *Report) PerNodeVsBound() (ratio float64, ok bool) {
	d, ok := r.ScryptPerNode()
	if !ok || r.Meta.OneScrypt <= 0 {
		return 0, false
	}
	return float64(d) / float64(r.Meta.OneScrypt), true
}

// ProcessCoverage returns the sampled CPU over the CPU the run measured
// for its whole process (Result.CPU); ok is false when either is unknown.
// Near 1 means the profile saw all the work.
func (r *Report) ProcessCoverage() (float64, bool) {
	if r.Run == nil || r.Run.CPU <= 0 || r.Total <= 0 {
		return 0, false
	}
	return float64(r.Total) / float64(r.Run.CPU), true
}

// Hz returns the sampling rate, or 0 if the period is unknown.
func (r *Report) Hz() int {
	if r.Period <= 0 {
		return 0
	}
	return int(time.Second / r.Period)
}

// Meta is what cmd/bench records about a run in its CPU profile's
// comments (profile.Profile.Comments; go tool pprof -comments shows them).
type Meta struct {
	// Model is the server model the profile covers.
	Model string
	// Scenario says in words what ran ("100 nodes, logN 12, inproc, ...").
	Scenario string
	// OneScrypt is the CPU one scrypt verification spent in the scrypt
	// work (the Scrypt category), measured by profiling
	// Herd.EstimateLowerBound in the same process right before the run.
	OneScrypt time.Duration
	// Verifications is how many verifications OneScrypt was measured
	// over.
	Verifications int
}

const metaPrefix = "nodepass-bench:"

// Comments returns m as profile comments.
func (m Meta) Comments() []string {
	out := []string{fmt.Sprintf("%s model=%s one_scrypt_cpu_ns=%d verifications=%d", metaPrefix,
		m.Model, m.OneScrypt.Nanoseconds(), m.Verifications)}
	if m.Scenario != "" {
		out = append(out, metaPrefix+" scenario: "+m.Scenario)
	}
	return out
}

// ParseMeta reads what Meta.Comments wrote; ok is false if the comments
// hold none of it.
func ParseMeta(comments []string) (m Meta, ok bool) {
	for _, c := range comments {
		rest, found := strings.CutPrefix(c, metaPrefix+" ")
		if !found {
			continue
		}
		if sc, isScenario := strings.CutPrefix(rest, "scenario: "); isScenario {
			m.Scenario = sc
			continue
		}
		for _, field := range strings.Fields(rest) {
			k, v, _ := strings.Cut(field, "=")
			switch k {
			case "model":
				m.Model, ok = v, true
			case "one_scrypt_cpu_ns":
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
					m.OneScrypt = time.Duration(n)
				}
			case "verifications":
				m.Verifications, _ = strconv.Atoi(v)
			}
		}
	}
	return m, ok
}
