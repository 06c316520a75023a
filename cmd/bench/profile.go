package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
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
	var localBound, localTransport time.Duration
	var err error
	if sc.BoundSample > 0 { // as bench.Run would measure it, outside the run's profile
		if localBound, err = h.EstimateLocalBound(ctx, sc.BoundSample, model); err != nil {
			return nil, err
		}
		if localTransport, err = h.EstimateTransport(ctx, sc); err != nil {
			return nil, err
		}
	}
	sc.BoundSample = 0

	runtime.GC()
	heap, err := watchHeap()
	if err != nil {
		return nil, err
	}
	var res *bench.Result
	cpu, err := captureCPU(func() error {
		var err error
		res, err = bench.Run(ctx, sc, h, model)
		return err
	})
	heapProf, heapErr := heap.stop()
	if err = cmp.Or(err, heapErr); err != nil {
		return nil, err
	}
	res.SetLocalBound(localBound, localTransport)
	cpu.Comments = append(cpu.Comments, pprofreport.Meta{Model: model, Scenario: describeScenario(sc)}.Comments()...)
	heapProf.Comments = append(heapProf.Comments, "nodepass-bench: model="+model, heap.note)
	for kind, p := range map[string]*profile.Profile{".cpu.pprof": cpu, ".heap.pprof": heapProf} {
		if err := writeProfile(filepath.Join(c.cpuprofileDir, model+kind), p); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func describeScenario(sc bench.Scenario) string {
	return fmt.Sprintf("%d nodes, logN %d, %s mode, %s agents, %d server(s) (%s), client timeout %v, seed %d, GOMAXPROCS %d",
		sc.Nodes, sc.LogN, sc.Mode, sc.Agent, sc.Servers, sc.LB, sc.ClientTimeout, sc.Seed, runtime.GOMAXPROCS(0))
}

// captureCPU returns a CPU profile of f.
func captureCPU(f func() error) (*profile.Profile, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return nil, fmt.Errorf("starting the CPU profile: %w", err)
	}
	ferr := f()
	pprof.StopCPUProfile()
	if ferr != nil {
		return nil, ferr
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU profile: %w", err)
	}
	return p, nil
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
	start, err := heapNow()
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
		cycle, live := h.GCCycles, h.Live
		if cycle == lastCycle || live <= w.live {
			lastCycle = cycle
			continue
		}
		lastCycle = cycle
		b, err := heapSnapshot()
		if err != nil {
			w.snapErr = err
			return
		}
		w.peak, w.live, w.cycle, w.at = b, live, cycle, time.Since(w.t0)
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
	end, err := heapNow()
	if err != nil {
		return nil, err
	}
	peak := end.Copy()
	w.note = "nodepass-bench: inuse_* at the end of the run (no GC cycle during the run raised the live heap); alloc_* over the whole run"
	if w.peak != nil {
		if peak, err = parseHeap(w.peak); err != nil {
			return nil, err
		}
		w.note = fmt.Sprintf("nodepass-bench: inuse_* at the peak of the live heap (GC cycle %d, %.0f MiB live, %.1fs into the run); alloc_* over the whole run",
			w.cycle, float64(w.live)/(1<<20), w.at.Seconds())
	}
	// inuse from the peak, alloc from end minus start.
	if err := scaleValues(peak, map[string]float64{"alloc_objects": 0, "alloc_space": 0}); err != nil {
		return nil, err
	}
	if err := scaleValues(end, map[string]float64{"inuse_objects": 0, "inuse_space": 0}); err != nil {
		return nil, err
	}
	if err := scaleValues(w.start, map[string]float64{"alloc_objects": -1, "alloc_space": -1, "inuse_objects": 0, "inuse_space": 0}); err != nil {
		return nil, err
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

func heapSnapshot() ([]byte, error) {
	var buf bytes.Buffer
	if err := pprof.Lookup("heap").WriteTo(&buf, 0); err != nil {
		return nil, fmt.Errorf("writing the heap profile: %w", err)
	}
	return buf.Bytes(), nil
}

// heapNow returns the heap profile as the runtime has published it.
func heapNow() (*profile.Profile, error) {
	b, err := heapSnapshot()
	if err != nil {
		return nil, err
	}
	return parseHeap(b)
}

func parseHeap(b []byte) (*profile.Profile, error) {
	p, err := profile.ParseData(b)
	if err != nil {
		return nil, fmt.Errorf("reading the heap profile: %w", err)
	}
	return p, nil
}
