// Package pprofreport says where the CPU of a herd run went, from the CPU
// profile cmd/bench writes per server model: the share of each Category
// (Classify gives the rules), scrypt CPU per joined node in units of one
// scrypt's CPU in the same run, and the top functions. It compares two
// profiles (WriteDiff) and checks one against limits and a baseline
// (Check). It reads profiles with github.com/google/pprof/profile only.
package pprofreport

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/verify"
)

// Report is what one CPU profile shows. Make one with FromProfile or
// Load; AttachRun adds the run's figures that per-node values need.
type Report struct {
	// Name is the server model the profile covers (its file name is
	// MODEL.cpu.pprof); File is where it was read from.
	Name, File string
	// Samples counts the profile's samples; Period is the time one
	// stands for (1/Hz); Total is the CPU time they add up to; Duration
	// is the wall time the profile covers.
	Samples                 int64
	Period, Total, Duration time.Duration
	// CPU is the CPU time per Category.
	CPU [numCategories]time.Duration
	// ScryptLabelled is the CPU of the samples labelled
	// nodepass.verify=scrypt: all of the Scrypt category when every
	// scrypt call ran under the label.
	ScryptLabelled time.Duration
	// Flat and Cum are the functions by CPU, highest first: the CPU spent
	// in the function itself, and in it or anything it called.
	Flat, Cum []FuncCPU
	// Run is the model's figures from the run's JSON; nil until AttachRun.
	Run *bench.Result
}

// FuncCPU is one function's CPU time in a profile.
type FuncCPU struct {
	Name string
	CPU  time.Duration
}

// FromProfile reads a CPU profile (sample types samples/count and
// cpu/nanoseconds, as runtime/pprof writes them) of the model name.
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
	flat, cum := map[string]time.Duration{}, map[string]time.Duration{}
	var frames []string
	seen := map[string]bool{}
	for _, s := range p.Sample {
		v, n := time.Duration(s.Value[cpuIdx]), int64(1)
		if countIdx >= 0 {
			n = s.Value[countIdx]
		}
		frames = skipPreempt(stack(s, frames))
		c := Classify(frames, s.Label)
		if c == Scrypt && label(s.Label, verify.ProfileLabel) == verify.ProfileScrypt {
			r.ScryptLabelled += v
		}
		r.CPU[c] += v
		r.Total += v
		r.Samples += n
		if len(frames) == 0 {
			continue
		}
		flat[frames[0]] += v
		clear(seen)
		for _, f := range frames {
			if !seen[f] {
				seen[f] = true
				cum[f] += v
			}
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

// Load reads the CPU profile at path (MODEL.cpu.pprof) with the run's figures from
// jsonPath, or from herd.json in the profile's directory when jsonPath is
// empty. A herd.json that is not there is left out, and the report says
// so; a jsonPath given that cannot be read, or that has no result for the
// model, is an error.
func Load(path, jsonPath string) (*Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("pprofreport: reading %s: %w", path, err)
	}
	r, err := FromProfile(p, strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".pprof"), ".cpu"))
	if err != nil {
		return nil, fmt.Errorf("pprofreport: %s: %s", path, strings.TrimPrefix(err.Error(), "pprofreport: "))
	}
	r.File = path
	explicit := jsonPath != ""
	if !explicit {
		jsonPath = filepath.Join(filepath.Dir(path), "herd.json")
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
	return float64(r.sum(cs...)) / float64(max(r.Total, 1))
}

// OwnShare returns the share of the module's own code.
func (r *Report) OwnShare() float64 { return r.Share(OwnCode()...) }

func (r *Report) sum(cs ...Category) time.Duration {
	var d time.Duration
	for _, c := range cs {
		d += r.CPU[c]
	}
	return d
}

// ScryptPerNode returns the scrypt work's CPU per joined node; ok is
// false without the run's figures or when no node joined.
func (r *Report) ScryptPerNode() (d time.Duration, ok bool) {
	if r.Run == nil || r.Run.Joined == 0 {
		return 0, false
	}
	return r.CPU[Scrypt] / time.Duration(r.Run.Joined), true
}

// PerNode returns ScryptPerNode in units of one scrypt's CPU in the same
// run (the scrypt work's CPU over the run's scrypt calls,
// Result.ScryptRuns): how many scrypts of CPU each joined node cost. The
// CPU time cancels out, so no change in the machine's speed or load can
// move it. ok is false without the run's figures, or when no node joined
// or no scrypt ran.
func (r *Report) PerNode() (ratio float64, ok bool) {
	if r.Run == nil || r.Run.Joined == 0 || r.Run.ScryptRuns == 0 {
		return 0, false
	}
	return float64(r.Run.ScryptRuns) / float64(r.Run.Joined), true
}

// OneScrypt returns one scrypt's CPU in the run: the scrypt work's CPU
// over the run's scrypt calls; ok is false when either is unknown.
func (r *Report) OneScrypt() (time.Duration, bool) {
	if r.Run == nil || r.Run.ScryptRuns == 0 {
		return 0, false
	}
	return r.CPU[Scrypt] / time.Duration(r.Run.ScryptRuns), true
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
