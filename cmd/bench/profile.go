package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
)

// With -cpuprofile-dir, each model's process writes DIR/MODEL.cpu.pprof
// and DIR/MODEL.heap.pprof covering that model's run only:
//
//   - The local lower bound (-bound-sample) is measured first, as
//     bench.Run would, outside the profiles; bench.Run is then called with
//     BoundSample 0.
//   - The CPU profile starts right before bench.Run and stops when it
//     returns: the servers' setup (milliseconds) and the herd. It samples
//     at runtime/pprof's own 100 Hz: the runtime takes a sample each time a
//     thread's CPU timer expires, and Linux checks CPU timers on its
//     scheduler tick (250 Hz here), so faster rates lose samples
//     (measured on the CI scenario: 98-99% of the process's CPU time
//     covered at 100 Hz, 80% at 250 Hz, 47% at 500 Hz).
//   - The heap profile's inuse_* values are taken at the peak of the live
//     heap, the cycle whose live heap was the run's peak_heap_mib (the
//     runtime publishes heap profiles as of a completed GC cycle; the end
//     of a run is the wrong moment, when a nodepass run holds nothing but
//     its cache). Its alloc_* values cover the whole run: the heap profile
//     at its end minus the one at its start.

// runModel runs one model, with its profiles when c.cpuprofileDir is set.
func runModel(ctx context.Context, c *config, sc bench.Scenario, h *bench.Herd, model string) (*bench.Result, error) {
	if c.cpuprofileDir == "" {
		return bench.Run(ctx, sc, h, model)
	}
	// As bench.Run would measure them, outside the run's profile.
	localBound, localTransport, err := h.LocalBounds(ctx, sc, model, true)
	if err != nil {
		return nil, err
	}
	sc.BoundSample = 0

	runtime.GC()
	heap, err := watchHeap()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		heap.stop()
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	res, err := bench.Run(ctx, sc, h, model)
	pprof.StopCPUProfile()
	heapProf, heapErr := heap.stop()
	if err = cmp.Or(err, heapErr); err != nil {
		return nil, err
	}
	cpu, err := profile.Parse(&buf)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU profile: %w", err)
	}
	res.SetLocalBound(localBound, localTransport)
	cpu.Comments = append(cpu.Comments, "nodepass-bench: model="+model+": "+describeScenario(sc))
	heapProf.Comments = append(heapProf.Comments, "nodepass-bench: model="+model, heap.note)
	for kind, p := range map[string]*profile.Profile{".cpu.pprof": cpu, ".heap.pprof": heapProf} {
		if err := writeProfile(filepath.Join(c.cpuprofileDir, model+kind), p); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func describeScenario(sc bench.Scenario) string {
	return fmt.Sprintf("%d nodes, logN %d, %s mode, %s agents, %s (%s), client timeout %v, seed %d, GOMAXPROCS %d",
		sc.Nodes, sc.LogN, sc.Mode, sc.Agent, plural(sc.Servers, "server"), sc.LB, sc.ClientTimeout, sc.Seed, runtime.GOMAXPROCS(0))
}

func writeProfile(path string, p *profile.Profile) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// heapWatch keeps the heap profile of the GC cycle with the highest live
// heap since it started.
type heapWatch struct {
	start   *profile.Profile
	t0      time.Time
	done    chan struct{}
	wg      sync.WaitGroup
	peak    []byte // heap profile at the peak, gzipped proto
	live    uint64 // the live heap of that cycle
	cycle   uint64
	at      time.Duration // since t0
	snapErr error
	note    string // says what the merged profile holds; set by stop
}

// heapWatchEvery is how often the watch looks for a finished GC cycle.
const heapWatchEvery = 5 * time.Millisecond

func watchHeap() (*heapWatch, error) {
	start, err := parseHeap(heapSnapshot())
	if err != nil {
		return nil, err
	}
	w := &heapWatch{start: start, t0: time.Now(), done: make(chan struct{})}
	w.wg.Go(w.loop)
	return w, nil
}

func (w *heapWatch) loop() {
	lastCycle := bench.ReadHeap().GCCycles
	tick := time.NewTicker(heapWatchEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
		h := bench.ReadHeap()
		newCycle := h.GCCycles != lastCycle
		if lastCycle = h.GCCycles; !newCycle || h.Live <= w.live {
			continue
		}
		b, err := heapSnapshot()
		if err != nil {
			w.snapErr = err
			return
		}
		w.peak, w.live, w.cycle, w.at = b, h.Live, h.GCCycles, time.Since(w.t0)
	}
}

// stop ends the watch and returns the heap profile: inuse_* at the peak,
// alloc_* over the time since watchHeap.
func (w *heapWatch) stop() (*profile.Profile, error) {
	close(w.done)
	w.wg.Wait()
	if w.snapErr != nil {
		return nil, w.snapErr
	}
	runtime.GC() // publish the allocations of the last cycles
	end, err := parseHeap(heapSnapshot())
	if err != nil {
		return nil, err
	}
	peak := end.Copy()
	w.note = "nodepass-bench: inuse_* at the end of the run (no GC cycle during the run raised the live heap); alloc_* over the whole run"
	if w.peak != nil {
		if peak, err = parseHeap(w.peak, nil); err != nil {
			return nil, err
		}
		w.note = fmt.Sprintf("nodepass-bench: inuse_* at the peak of the live heap (GC cycle %d, %.0f MiB live, %.1fs into the run); alloc_* over the whole run",
			w.cycle, float64(w.live)/(1<<20), w.at.Seconds())
	}
	// inuse from the peak, alloc from end minus start.
	for p, by := range map[*profile.Profile]map[string]float64{
		peak: {"alloc_objects": 0, "alloc_space": 0}, end: {"inuse_objects": 0, "inuse_space": 0},
		w.start: {"alloc_objects": -1, "alloc_space": -1, "inuse_objects": 0, "inuse_space": 0},
	} {
		if err := scaleValues(p, by); err != nil {
			return nil, err
		}
	}
	merged, err := profile.Merge([]*profile.Profile{peak, end, w.start})
	if err != nil {
		return nil, fmt.Errorf("merging heap profiles: %w", err)
	}
	return merged, nil
}

// scaleValues multiplies the values of the named sample types. (Profile.ScaleN
// drops samples whose only non-zero values are those left unscaled.)
func scaleValues(p *profile.Profile, by map[string]float64) error {
	ratios := make([]float64, len(p.SampleType))
	found := 0
	for i, st := range p.SampleType {
		ratios[i] = 1
		if r, ok := by[st.Type]; ok {
			ratios[i] = r
			found++
		}
	}
	if found != len(by) {
		return fmt.Errorf("heap profile: sample types %v, want %d of them named in %v", p.SampleType, len(by), by)
	}
	for _, s := range p.Sample {
		for i, r := range ratios {
			s.Value[i] = int64(float64(s.Value[i]) * r)
		}
	}
	return nil
}

// heapSnapshot returns the heap profile as the runtime has published it.
func heapSnapshot() ([]byte, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		return nil, fmt.Errorf("writing the heap profile: %w", err)
	}
	return buf.Bytes(), nil
}

// parseHeap parses a heap snapshot, or passes on err.
func parseHeap(b []byte, err error) (*profile.Profile, error) {
	var p *profile.Profile
	if err == nil {
		if p, err = profile.ParseData(b); err != nil {
			err = fmt.Errorf("reading the heap profile: %w", err)
		}
	}
	return p, err
}

// prepareProfileDir makes the -cpuprofile-dir directory, if any, and
// removes the profiles an earlier run left there for the models about to
// run, so that a model whose worker dies without writing its profiles is
// reported without them rather than with another run's.
func prepareProfileDir(c *config) error {
	if c.cpuprofileDir == "" {
		return nil
	}
	if err := os.MkdirAll(c.cpuprofileDir, 0o755); err != nil {
		return err
	}
	for _, m := range c.models {
		for _, kind := range []string{".cpu.pprof", ".heap.pprof"} {
			if err := os.Remove(filepath.Join(c.cpuprofileDir, m+kind)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// writeProfileDir finishes a -cpuprofile-dir run: the run's JSON as
// DIR/herd.json (beside the profiles, where cmd/profile looks for it) and
// DIR/meta.json: how the files were made (command, commit, Go, machine,
// date, load, scenario, lower bound). profiles/README.md says how to read
// them.
func writeProfileDir(c *config, args []string, h *bench.Herd, results []*bench.Result) error {
	dir := c.cpuprofileDir
	jsonPath := filepath.Join(dir, "herd.json")
	if c.jsonPath == "" || filepath.Clean(c.jsonPath) != filepath.Clean(jsonPath) {
		if err := writeResults(jsonPath, results); err != nil {
			return err
		}
	}
	commit, tree := gitState(dir)
	cpu, osName := machine()
	meta := struct {
		Command, Commit, WorkingTree, Go, Machine, OS, Date, LoadAverage, Scenario string
		LowerBoundS                                                                float64 `json:"lower_bound_s"`
		Workers                                                                    int
		CPUProfileHz                                                               int `json:"cpu_profile_hz"`
	}{
		Command: commandLine(args), Commit: commit, WorkingTree: tree, Go: runtime.Version(),
		Machine: cpu, OS: osName, Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		LoadAverage: loadAverage(), Scenario: describeScenario(c.sc),
		LowerBoundS: h.LowerBound.Seconds(), Workers: h.Workers, CPUProfileHz: 100,
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta.json"), append(b, '\n'), 0o644)
}

// commandLine is the command that made this run, for a reader to run again.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.TrimSpace("go run ./cmd/bench " + strings.Join(quoted, " "))
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// gitState returns the commit checked out and whether the working tree
// differs from it, outside dir (where this run writes), or "unknown"
// without git.
func gitState(dir string) (commit, tree string) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown (git rev-parse HEAD failed)", ""
	}
	commit = strings.TrimSpace(string(out))
	args := []string{"status", "--porcelain", "--untracked-files=no"}
	if rel, err := filepath.Rel(".", dir); err == nil && !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "..") {
		args = append(args, "--", ".", ":(exclude)"+rel)
	}
	out, err = exec.Command("git", args...).Output()
	switch {
	case err != nil:
		tree = "unknown"
	case len(bytes.TrimSpace(out)) == 0:
		tree = "clean"
	default:
		var files []string
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			files = append(files, line[min(3, len(line)):]) // "XY path"
		}
		tree = fmt.Sprintf("%s changed and not committed: %s", plural(len(files), "file"), strings.Join(files, ", "))
	}
	return commit, tree
}

// machine describes this computer: CPU model, cores, memory and OS.
func machine() (cpu, osName string) {
	// field returns the value of the first line of file that starts with
	// key, then a separator, or "?".
	field := func(file, key, sep string) string {
		b, _ := os.ReadFile(file)
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, sep); ok && strings.TrimSpace(k) == key {
				return strings.Trim(strings.TrimSpace(v), `"`)
			}
		}
		return "?"
	}
	cpu = fmt.Sprintf("%s, %d logical CPUs, GOMAXPROCS %d, memory %s", field("/proc/cpuinfo", "model name", ":"),
		runtime.NumCPU(), runtime.GOMAXPROCS(0), field("/proc/meminfo", "MemTotal", ":"))
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return cpu, fmt.Sprintf("%s/%s, %s, kernel %s", runtime.GOOS, runtime.GOARCH, field("/etc/os-release", "PRETTY_NAME", "="), strings.TrimSpace(string(kernel)))
}

// writeResults writes results as the JSON array -json documents, one
// model's object per line: indenting their per-node arrays would double
// the file.
func writeResults(path string, results []*bench.Result) error {
	b := []byte("[\n")
	for i, r := range results {
		o, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding results: %w", err)
		}
		b = append(b, o...)
		if i < len(results)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return os.WriteFile(path, append(b, "]\n"...), 0o644)
}
