// Command bench runs the herd benchmark: every node of a rebooted cluster
// asks at once for its password to be verified, against each server model
// in turn, and bench prints a table of how each fared.
//
// With no flags it runs the seed scenario: 320 nodes, scrypt logN 15, real
// HTTPS on 127.0.0.1, k3s agents (each attempt k3s's sequence of requests,
// a new TLS connection and a 10 s client timeout each, retried every 5-10
// s), all four models (k3s-v1.25, k3s-v1.28, k3s-latest, nodepass).
// Progress bars go to stderr, the table to stdout.
//
//	go run ./cmd/bench
//	go run ./cmd/bench -agent backoff -models nodepass
//	go run ./cmd/bench -servers 3 -lb failover -json out.json -plot herd.svg
//
// Each model runs in its own child process (this program re-executed), so
// that an unbounded model's heap and its scrypt calls, which cannot be
// cancelled, die with it and each model's heap figure is its own. Split
// (-split, the default where the machine allows: split.go), each model has
// two, its servers' and its agents', each pinned to CPUs of its own. The
// stored hashes are made once in the parent, and the lower bounds measured
// once with nothing else running: in the parent, or split, in a child
// pinned to the servers' CPUs. Bad flags exit with status 2.
//
// With -cpuprofile-dir DIR each model's process also writes a CPU and a
// heap profile of its run (DIR/MODEL.cpu.pprof, DIR/MODEL.heap.pprof),
// and the parent DIR/herd.json and DIR/meta.json; cmd/profile reads
// them:
//
//	go run ./cmd/bench -cpuprofile-dir profiles -json profiles/herd.json
//	go run ./cmd/profile report profiles/nodepass.cpu.pprof
//	go run ./cmd/profile check profiles/ci new
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/kube/apitest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// defaultDeadline bounds each model's run so that the default scenario's
// four models, the hashes and the lower bound fit in 5 minutes on 2 cores.
const defaultDeadline = 90 * time.Second

// config is the parsed command line.
type config struct {
	sc         bench.Scenario
	models     []string
	agents     []bench.Policy // -agent: each model runs with each; sc.Agent is the first
	jsonPath   string
	plotPath   string
	isolate    bool
	replotPath string
	worker     string // hidden: run this one model as a child process
	// cpuprofileDir, when set, gets each model's CPU and heap profiles,
	// the run's JSON (herd.json) and meta.json (profile.go, profiledir.go).
	cpuprofileDir string
	// store is "memory" (every model) or "kube": the nodepass model over
	// kube.Store on a kube-apiserver this program starts (kubestore.go).
	store        string
	apiserverBin string
	// split is auto, on or off: the agents and the servers in processes
	// of their own, pinned to CPUs of their own (split.go); agentCPUs is
	// how many CPUs the agents get (0: half).
	split     string
	agentCPUs int
	role      string // hidden: the worker's part of a split run
}

// isClient reports whether p is nodepass's agent.Client.
func isClient(p bench.Policy) bool {
	_, ok := p.(bench.ClientPolicy)
	return ok
}

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// hiddenFlags are for the parent-child protocol, not for people.
var hiddenFlags = map[string]bool{"worker": true, "worker-role": true}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		c                       config
		nodes, logN, servers    int
		hung, known             int
		certs, notBefore        string
		caYears                 float64
		timeout, deadline       time.Duration
		agent, models, mode, lb string
		maxHeap                 = byteSize(bench.DefaultMaxHeap)
		scryptMemory            scryptBudget
		seed                    uint64
		boundSample             int
	)
	fs.IntVar(&nodes, "nodes", bench.DefaultNodes, "number of nodes (agents) in the herd")
	fs.IntVar(&logN, "logn", bench.DefaultLogN, "scrypt cost exponent of the stored hashes (k3s: 15)")
	fs.DurationVar(&timeout, "timeout", bench.DefaultClientTimeout, "agents' HTTP client timeout")
	fs.StringVar(&agent, "agent", bench.PolicyJitter, "comma-separated agent kinds, each model run with each: "+strings.Join(bench.PolicyNames(), ", ")+" (k3s's agents with a retry policy, or nodepass's agent.Client, -lb through its load balancer; these need -mode http)")
	fs.IntVar(&hung, "hung", 0, "how many of the -servers (the first) accept connections and complete TLS, then never answer")
	fs.IntVar(&known, "known", 0, "how many servers each agent remembers from before the reboot, the hung ones first (0: all); nodepass agents also know their configured server, a healthy one")
	fs.StringVar(&certs, "certs", "none", "what the agents have on disk: none (a first join) or valid (the certificates of an earlier join, issued at the start as the servers issue them)")
	fs.Float64Var(&caYears, "ca-years", 3, "age of the servers' CA in years (0.01: three and a half days): k3s makes its CAs, valid ten years, with the cluster")
	fs.StringVar(&notBefore, "notbefore", "today", "the NotBefore of the certificates the servers issue, each valid a year: today (max(now - 1h, the CA's), as k3s today) or ca (the CA's, as k3s and RKE2 before dynamiclistener's CalculateNotBefore)")
	fs.StringVar(&models, "models", "all", "comma-separated server models, or all: "+strings.Join(bench.Models(), ", "))
	fs.StringVar(&mode, "mode", string(bench.ModeHTTP), "http (real HTTPS on 127.0.0.1) or inproc (direct calls)")
	fs.IntVar(&servers, "servers", 1, "number of servers, each its own model instance sharing one store")
	fs.StringVar(&lb, "lb", string(bench.LBSticky), "agents' load balancer over several servers: sticky or failover")
	fs.DurationVar(&deadline, "deadline", defaultDeadline, "longest run per model")
	fs.Var(&scryptMemory, "scrypt-memory", "nodepass's scrypt budget per server (verify.Options.ScryptMemory): a `SIZE`, or none (default: verify's, 1GiB)")
	fs.Var(&maxHeap, "max-heap", "heap guard: stop a model whose heap in use passes this `SIZE` (e.g. 4GiB, 512MiB)")
	fs.StringVar(&c.jsonPath, "json", "", "write the results to `FILE`: a JSON array, one object per model")
	fs.StringVar(&c.plotPath, "plot", "", "draw joined nodes over time to `FILE` (.svg or .png)")
	fs.Uint64Var(&seed, "seed", 1, "seed of the agents' random delays")
	fs.IntVar(&boundSample, "bound-sample", 64, "before each model, estimate the lower bound from this many verifications, under the run's own load (0: off)")
	fs.BoolVar(&c.isolate, "isolate", true, "run each model in its own child process")
	fs.StringVar(&c.replotPath, "replot", "", "draw -plot from the results in `FILE` (an earlier -json) instead of running")
	fs.StringVar(&c.cpuprofileDir, "cpuprofile-dir", "", "write each model's CPU and heap profiles of its run to `DIR`/MODEL.cpu.pprof and MODEL.heap.pprof, with DIR/herd.json and DIR/meta.json (go run ./cmd/profile reads them)")
	fs.StringVar(&c.store, "store", "memory", "memory, or kube: run the nodepass model over kube.Store on a kube-apiserver started from -apiserver-bin, next to the memory store, and count API requests per join")
	fs.StringVar(&c.apiserverBin, "apiserver-bin", "", "`DIR` holding etcd and kube-apiserver for -store kube (make apiserver builds them in tools/apiserver/bin); default $"+apitest.BinEnv)
	adversity := addAdversityFlags(fs)
	reboot := addRebootFlags(fs)
	fs.StringVar(&c.split, "split", "auto", "auto, on or off: run each model's agents and servers in two processes pinned to CPUs of their own (Linux, 2 CPUs or more; the lower bounds on the servers' CPUs); auto splits where the machine and the scenario allow, on fails for a scenario that cannot")
	fs.IntVar(&c.agentCPUs, "agent-cpus", 0, "with -split, how many of this process's CPUs the agents get (0: half, rounded down); the servers get the rest")
	fs.StringVar(&c.worker, "worker", "", "internal: run one model as a child process")
	fs.StringVar(&c.role, "worker-role", "", "internal: the child's part of a split run")
	fs.Usage = func() {} // parse errors get one line, -h the whole usage

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stderr)
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if nodes < 1 || nodes > 100000 {
		bad("-nodes %d: want 1 to 100000", nodes)
	}
	if logN < 1 || logN > 20 {
		bad("-logn %d: want 1 to 20", logN)
	}
	if timeout <= 0 {
		bad("-timeout %v: want a positive duration", timeout)
	}
	if deadline <= 0 {
		bad("-deadline %v: want a positive duration", deadline)
	}
	if servers < 1 || servers > 64 {
		bad("-servers %d: want 1 to 64", servers)
	}
	if boundSample < 0 {
		bad("-bound-sample %d: want 0 or more", boundSample)
	}
	if maxHeap == 0 {
		bad("-max-heap: want a positive size")
	}
	for _, name := range strings.Split(agent, ",") {
		p, err := bench.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			bad("-agent: %v", strings.TrimPrefix(err.Error(), "bench: "))
			continue
		}
		c.agents = append(c.agents, p)
	}
	if hung < 0 || hung >= servers {
		bad("-hung %d: want 0 to -servers - 1 (%d): one server at least must answer", hung, servers-1)
	}
	if known < 0 || known > servers {
		bad("-known %d: want 0 to -servers (%d)", known, servers)
	}
	if certs != "none" && certs != "valid" {
		bad("-certs %q: want none or valid", certs)
	}
	if !(caYears > 0 && caYears <= 9) {
		bad("-ca-years %v: want more than 0, at most 9", caYears)
	}
	if notBefore != "today" && notBefore != "ca" {
		bad("-notbefore %q: want today or ca", notBefore)
	}
	m, err := bench.ParseMode(mode)
	if err != nil {
		bad("-mode: %v", strings.TrimPrefix(err.Error(), "bench: "))
	}
	l, err := bench.ParseLB(lb)
	if err != nil {
		bad("-lb: %v", strings.TrimPrefix(err.Error(), "bench: "))
	}
	if c.models, err = parseModels(models); err != nil {
		bad("-models: %v", err)
	}
	if c.plotPath != "" {
		if ext := strings.ToLower(filepath.Ext(c.plotPath)); ext != ".svg" && ext != ".png" {
			bad("-plot %q: want a file name ending in .svg or .png", c.plotPath)
		}
	}
	if c.replotPath != "" && c.plotPath == "" {
		bad("-replot needs -plot")
	}
	if c.worker != "" {
		if err := bench.ValidModel(c.worker); err != nil {
			bad("-worker: %v", strings.TrimPrefix(err.Error(), "bench: "))
		}
	}
	switch c.store {
	case "memory":
	case "kube":
		if c.cpuprofileDir != "" || c.replotPath != "" || c.plotPath != "" || c.jsonPath != "" {
			bad("-store kube prints a table only: no -cpuprofile-dir, -json, -plot or -replot")
		}
	default:
		bad("-store %q: want memory or kube", c.store)
	}
	switch c.split {
	case "auto", "on", "off":
	default:
		bad("-split %q: want auto, on or off", c.split)
	}
	if c.agentCPUs < 0 {
		bad("-agent-cpus %d: want 0 or more", c.agentCPUs)
	}
	switch c.role {
	case "", roleServers, roleAgents, roleBound:
	default:
		bad("-worker-role %q: want %s, %s or %s", c.role, roleServers, roleAgents, roleBound)
	}
	adversity.check(nodes, bad)
	reboot.check(bad)
	if m == bench.ModeInproc && (hung > 0 || certs == "valid" || slices.ContainsFunc(c.agents, isClient)) {
		bad("-hung, -certs valid and the nodepass agents need -mode http")
	}
	if len(errs) > 0 {
		return nil, usageError{strings.Join(errs, "\n")}
	}
	c.sc = bench.Scenario{
		Nodes: nodes, LogN: logN, ClientTimeout: timeout, Agent: c.agents[0], Hung: hung, Known: known, ValidCerts: certs == "valid",
		CAAge: time.Duration(caYears * 365 * 24 * float64(time.Hour)), CANotBefore: notBefore == "ca",
		Servers: servers, LB: l, Mode: m, Deadline: deadline,
		MaxHeap: uint64(maxHeap), Seed: seed, BoundSample: boundSample, ScryptMemory: int64(scryptMemory),
	}
	adversity.apply(&c.sc)
	reboot.apply(&c.sc)
	if why := splitUnsupported(&c); c.split == "on" && why != "" && c.store == "memory" {
		return nil, usageError{"-split on: not with " + why}
	}
	return &c, nil
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: bench [flags]\n       bench scale-plot -o FILE LABEL=GLOB... (bench scale-plot -h)\n       bench scale-table GLOB... (bench scale-table -h)\n\nRuns the herd benchmark: every node of a rebooted cluster asks at once to be\nverified, against each server model in turn. Flags:\n\n")
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] {
			return
		}
		name, help := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "  -%s", f.Name)
		if name != "" {
			fmt.Fprintf(w, " %s", name)
		}
		fmt.Fprintf(w, "\n    \t%s", help)
		if f.DefValue != "" && f.DefValue != "false" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

func parseModels(s string) ([]string, error) {
	if s == "all" {
		return bench.Models(), nil
	}
	var out []string
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if err := bench.ValidModel(name); err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), "bench: "))
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out, nil
}

// byteSize is a flag value: a size in bytes with an optional KiB, MiB,
// GiB (or K, M, G) suffix.
type byteSize uint64

func (b *byteSize) String() string {
	switch v := uint64(*b); {
	case v >= 1<<30 && v%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", v>>30)
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", v>>20)
	}
	return strconv.FormatUint(uint64(*b), 10)
}

func (b *byteSize) Set(s string) error {
	units := []struct {
		suffix string
		shift  uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"G", 30}, {"M", 20}, {"K", 10}, {"B", 0}}
	num, shift := s, uint(0)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, shift = strings.TrimSuffix(s, u.suffix), u.shift
			break
		}
	}
	v, err := strconv.ParseUint(strings.TrimSpace(num), 10, 64)
	if err != nil || v > (1<<63)>>shift {
		return fmt.Errorf("invalid size %q: want a number of bytes with an optional KiB, MiB or GiB suffix", s)
	}
	*b = byteSize(v << shift)
	return nil
}

// scryptBudget is -scrypt-memory: a size, or none (-1: no budget); 0
// means verify's default.
type scryptBudget int64

func (b *scryptBudget) String() string {
	switch {
	case *b == 0:
		return ""
	case *b < 0:
		return "none"
	}
	s := byteSize(*b)
	return s.String()
}

func (b *scryptBudget) Set(s string) error {
	if s == "none" {
		*b = -1
		return nil
	}
	var size byteSize
	if err := size.Set(s); err != nil {
		return err
	}
	if size == 0 {
		return fmt.Errorf("invalid size %q: want a positive size, or none", s)
	}
	*b = scryptBudget(size)
	return nil
}

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "scale-plot" {
		return runScalePlot(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scale-table" {
		return runScaleTable(args[1:], stdout, stderr)
	}
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %v\nRun bench -h for the flags.\n", err)
		return 2
	}
	if c.worker != "" {
		return runWorker(ctx, c, stdin, stdout, stderr)
	}
	if c.replotPath != "" {
		if err := replot(c); err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	if c.store == "kube" {
		dir, err := apiserverBin(c.apiserverBin)
		if err == nil {
			err = runKubeStore(ctx, c, dir, stdout, stderr)
		}
		if err != nil {
			fmt.Fprintf(stderr, "bench: %v\n", err)
			return 1
		}
		return 0
	}
	if err := runParent(ctx, c, args, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}
