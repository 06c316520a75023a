package main

// -store kube: the nodepass model over kube.Store on a real kube-apiserver
// that this program starts (kube/apitest), next to the same model over the
// memory store, in one run. It counts the API requests the Stores make,
// through a wrapping http.RoundTripper, to show what a herd costs the API
// server.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/kube/apitest"
	"github.com/nodepass/nodepass/verify"
)

// The node-password identity's client-side rate limit, as the example
// server sets it (examples/server/store.go): only Creates and the rare
// read-after-create GETs go through it.
const (
	kubeQPS   = 50
	kubeBurst = 100
)

// apiCounter counts HTTP requests to the API server by kind.
type apiCounter struct {
	mu sync.Mutex
	n  map[string]uint64
}

// kinds of requests, in the order they are printed.
var apiKinds = []string{"list", "watch", "get", "create", "other"}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.n[requestKind(req)]++
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// snapshot returns the counts so far.
func (c *apiCounter) snapshot() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// requestKind classifies a request to the secrets API.
func requestKind(req *http.Request) string {
	collection := strings.HasSuffix(req.URL.Path, "/secrets")
	switch {
	case req.Method == http.MethodPost && collection:
		return "create"
	case req.Method == http.MethodGet && collection && req.URL.Query().Get("watch") != "":
		return "watch"
	case req.Method == http.MethodGet && collection:
		return "list"
	case req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/secrets/"):
		return "get"
	}
	return "other"
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// storeRun is one run of the nodepass model over one store.
type storeRun struct {
	store, phase    string
	res             *bench.Result
	gets, creates   uint64
	startup, during map[string]uint64 // API requests before the run (informer sync) and during it; nil for memory
	sync            time.Duration     // Start to WaitForSync
}

// runKubeStore runs the herd with the nodepass model four times: a first
// boot (every node enrolls) and then a reboot (every node verifies), each
// over the memory store and over kube.Store on a kube-apiserver started
// from binDir. It prints a table of joins, store calls and API requests
// per join.
func runKubeStore(ctx context.Context, c *config, binDir string, stdout, stderr io.Writer) error {
	sc := c.sc
	sc.BoundSample = 0 // the API server shares the CPUs; a local bound would not mean much
	fmt.Fprintf(stderr, "bench: -store kube: %d nodes, logN %d, %s mode, %s agents, deadline %v per run, GOMAXPROCS %d\n",
		sc.Nodes, sc.LogN, sc.Mode, sc.Agent, sc.Deadline, runtime.GOMAXPROCS(0))
	defer func() { fmt.Fprintf(stderr, "bench: load average at end: %s\n", loadAverage()) }()
	// Before the API server starts; agents and servers in this process.
	h, err := prepareHerd(ctx, sc, func(h *bench.Herd) error { return h.MeasureLowerBound(ctx) }, stderr)
	if err != nil {
		return err
	}

	srv, err := apitest.Run(ctx, &apitest.Options{BinDir: binDir})
	if err != nil {
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	defer srv.Stop()
	fmt.Fprintf(stderr, "bench: kube-apiserver at %s ready in %.1fs\n", srv.URL, srv.StartupTime.Seconds())

	var runs []storeRun
	for _, phase := range []string{"enroll", "reboot"} {
		// Memory.
		mem := verify.NewMemoryStore()
		if phase == "reboot" {
			for _, n := range h.Nodes {
				mem.Set(n.Name, n.Hash)
			}
		}
		r, err := runOnStore(ctx, sc, h, "memory", phase, mem, stderr)
		if err != nil {
			return err
		}
		runs = append(runs, r)

		// kube: a fresh Store (own informer, own client) each phase; the
		// reboot finds the secrets the enroll phase created.
		counter := &apiCounter{n: make(map[string]uint64)}
		cfg := rest.CopyConfig(srv.Node)
		cfg.QPS, cfg.Burst = kubeQPS, kubeBurst
		cfg.Wrap(counter.wrap)
		client, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("kube client: %w", err)
		}
		ks, err := kube.New(client, nil)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := ks.Start(ctx); err != nil {
			ks.Close()
			return err
		}
		if err := ks.WaitForSync(ctx); err != nil {
			ks.Close()
			return err
		}
		synced := time.Since(t0)
		startup := counter.snapshot()
		r, err = runOnStore(ctx, sc, h, "kube", phase, ks, stderr)
		ks.Close()
		if err != nil {
			return err
		}
		r.startup, r.sync = startup, synced
		r.during = minus(counter.snapshot(), startup)
		runs = append(runs, r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	printStoreRuns(stdout, runs)
	return nil
}

// runOnStore runs the nodepass model over store, counting its calls.
func runOnStore(ctx context.Context, sc bench.Scenario, h *bench.Herd, name, phase string, store verify.Store, stderr io.Writer) (storeRun, error) {
	counting := bench.NewCountingStore(store)
	bar := newProgressBar(stderr, name+" "+phase, sc.Nodes)
	sc.Progress = func(p bench.Progress) { bar.update(p.Joined, p.Elapsed, false) }
	res, err := bench.RunStore(ctx, sc, h, bench.ModelNodepass, counting)
	if err != nil {
		return storeRun{}, err
	}
	bar.update(res.Joined, res.Completion, true)
	gets, creates := counting.Calls()
	return storeRun{store: name, phase: phase, res: res, gets: gets, creates: creates}, nil
}

func minus(a, b map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(a))
	for k, v := range a {
		out[k] = v - b[k]
	}
	return out
}

// printStoreRuns prints one row per run. API requests are counted by kind,
// list/watch/get/create/other: during the run, and at the start (from
// Start to WaitForSync, the informer's list and watch).
func printStoreRuns(w io.Writer, runs []storeRun) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tphase\tjoined\tcompletion\tp50\tscrypt/node\tstore Get/join\tCreate/join\tAPI req/join\tAPI req in run\tAPI req at start\tsync\t")
	for _, r := range runs {
		per := func(n uint64) string {
			if r.res.Joined == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", float64(n)/float64(r.res.Joined))
		}
		api, during, startup, sync := "0", "-", "-", "-"
		if r.during != nil {
			var total uint64
			var parts, startParts []string
			for _, k := range apiKinds {
				total += r.during[k]
				parts = append(parts, fmt.Sprint(r.during[k]))
				startParts = append(startParts, fmt.Sprint(r.startup[k]))
			}
			api, during, startup = per(total), strings.Join(parts, "/"), strings.Join(startParts, "/")
			sync = r.sync.Round(time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%.2fs\t%.2fs\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.store, r.phase, r.res.Joined, r.res.Nodes, r.res.Completion.Seconds(), r.res.P50.Seconds(),
			r.res.ScryptRunsPerNode, per(r.gets), per(r.creates), api, during, startup, sync)
	}
	tw.Flush()
	fmt.Fprintln(w, "API requests by kind: list/watch/get/create/other. \"at start\" is the informer's sync, before the run.")
}

// apiserverBin returns the -apiserver-bin flag's directory, or
// $NODEPASS_APISERVER_BIN's, once it is known to hold the binaries.
func apiserverBin(flagValue string) (string, error) {
	dir, err := apitest.BinDir(flagValue)
	if err != nil {
		return "", fmt.Errorf("-store kube: %w", err)
	}
	return dir, nil
}
