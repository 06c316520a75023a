// Command bench runs the herd benchmark: every node of a rebooted cluster
// asks at once for its password to be verified, against each server model
// in turn, and bench prints a table of how each fared. With no flags: 320
// nodes, scrypt logN 15, real HTTPS on 127.0.0.1, k3s agents, all four
// models. Progress goes to stderr, the table to stdout; bad flags exit 2.
//
//	go run ./cmd/bench
//	go run ./cmd/bench -agent backoff -models nodepass
//	go run ./cmd/bench -servers 3 -lb failover -json out.json -plot herd.svg
//
// Each model runs in a child process of its own (this program
// re-executed, worker.go), so that an unbounded model's heap and its
// scrypt calls die with it. Split (-split, split.go), each model has two,
// its servers' and its agents', pinned to CPUs of their own. The stored
// hashes are made once in the parent, and the lower bounds measured once
// with nothing else running.
//
// With -cpuprofile-dir DIR each model's process also writes a CPU and a
// heap profile of its run (profile.go), which cmd/profile reads:
//
//	go run ./cmd/bench -cpuprofile-dir profiles -json profiles/herd.json
//	go run ./cmd/profile report profiles/nodepass.cpu.pprof
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
	"github.com/nodepass/nodepass/cmd/internal/buildinfo"
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
	sc                                bench.Scenario
	models                            modelList
	agents                            policies // -agent: each model runs with each; sc.Agent is the first
	jsonPath, plotPath, cpuprofileDir string
	isolate, wide                     bool
	split                             string // auto, on or off (split.go)
	worker, role                      string // hidden: the model and part of a worker
	// The flags that set the Scenario once parsed.
	certs, notBefore string
	digestKey        bool
	version          bool
	spikes           float64
}

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseFlags parses the command line into a config. The flags write
// straight into its Scenario, which bench validates; the checks here are
// those of the command alone.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	def := bench.Scenario{Mode: bench.ModeHTTP, Deadline: defaultDeadline, Seed: 1, BoundSample: 64, StoreSpike: bench.DefaultStoreSpike}.WithDefaults()
	c := &config{models: bench.Models(), agents: policies{def.Agent}, isolate: true, split: "auto",
		certs: "none", notBefore: "today", digestKey: true, spikes: -1, sc: def}
	fs := c.flagSet()
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
	sc := &c.sc
	sc.ValidCerts, sc.CANotBefore, sc.NoDigestKey, sc.StoreSpikes = c.certs == "valid", c.notBefore == "ca", !c.digestKey, c.spikes
	if c.spikes == -1 {
		sc.StoreSpikes = sc.StoreFaults
	}
	var errs []string
	want := func(ok bool, format string, a ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}
	for _, e := range []struct {
		flag, v string
		of      []string
	}{
		{"certs", c.certs, []string{"none", "valid"}}, {"notbefore", c.notBefore, []string{"today", "ca"}},
		{"split", c.split, []string{"auto", "on", "off"}}, {"worker-role", c.role, []string{"", roleServers, roleAgents, roleBound}},
	} {
		want(slices.Contains(e.of, e.v), "-%s %q: want %s", e.flag, e.v, strings.Join(e.of, ", "))
	}
	ext := strings.ToLower(filepath.Ext(c.plotPath))
	want(c.plotPath == "" || ext == ".svg" || ext == ".png", "-plot %q: want a file name ending in .svg or .png", c.plotPath)
	for _, out := range [][2]string{{"json", c.jsonPath}, {"plot", c.plotPath}, {"cpuprofile-dir", c.cpuprofileDir}} {
		if out[1] != "" && c.worker == "" { // now, not after a run of minutes; a worker's parent checked them
			err := writable(out[1], out[0] == "cpuprofile-dir")
			want(err == nil, "-%s %q: %v", out[0], out[1], err)
		}
	}
	err := bench.ValidModel(c.worker)
	want(c.worker == "" || err == nil, "-worker: %v", err)
	for _, a := range c.agents { // the scenario with each agent kind
		sc.Agent = a
		if err := sc.Validate(); err != nil {
			errs = append(errs, strings.TrimPrefix(err.Error(), "bench: invalid scenario: "))
			break
		}
	}
	sc.Agent = c.agents[0]
	why := splitUnsupported(c)
	want(c.split != "on" || why == "", "-split on: not with %s", why)
	if len(errs) > 0 {
		return nil, usageError{strings.Join(errs, "\n")}
	}
	return c, nil
}

// writable reports whether a file can be made at path, or in it if dir
// (made first, as the run makes -cpuprofile-dir).
func writable(path string, dir bool) error {
	if !dir {
		path = filepath.Dir(path)
	} else if err := os.MkdirAll(path, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(path, ".bench-check-*")
	if err == nil {
		f.Close()
		err = os.Remove(f.Name())
	}
	return err
}

// flagSet declares bench's flags over c, their defaults c's values.
func (c *config) flagSet() *flag.FlagSet {
	sc := &c.sc
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // parse errors get one line, -h the whole usage
	fs.IntVar(&sc.Nodes, "nodes", sc.Nodes, "number of nodes (agents) in the herd")
	fs.IntVar(&sc.LogN, "logn", sc.LogN, "scrypt cost exponent of the stored hashes (k3s: 15)")
	fs.Var((*positive)(&sc.ClientTimeout), "timeout", "agents' HTTP client timeout")
	fs.Var(&c.agents, "agent", "comma-separated agent kinds, each model run with each: "+strings.Join(bench.PolicyNames(), ", ")+" (k3s's agents with a retry policy, or nodepass's agent.Client, -lb through its load balancer; these need -mode http)")
	fs.IntVar(&sc.Hung, "hung", 0, "how many of the -servers (the first) accept connections and complete TLS, then never answer")
	fs.IntVar(&sc.Known, "known", 0, "how many servers each agent remembers from before the reboot, the hung ones first (0: all); nodepass agents also know their configured server, a healthy one")
	fs.StringVar(&c.certs, "certs", c.certs, "what the agents have on disk: none (a first join) or valid (the certificates of an earlier join, issued at the start as the servers issue them)")
	fs.Var((*years)(&sc.CAAge), "ca-years", "age of the servers' CA in years: k3s makes its CAs, valid ten years, with the cluster")
	fs.StringVar(&c.notBefore, "notbefore", c.notBefore, "the NotBefore of the certificates the servers issue, each valid a year: today (max(now - 1h, the CA's), as k3s today) or ca (the CA's, as k3s and RKE2 before dynamiclistener's CalculateNotBefore)")
	fs.Var(&c.models, "models", "comma-separated server models, or all: "+strings.Join(bench.Models(), ", "))
	fs.Var(&sc.Mode, "mode", "http (real HTTPS on 127.0.0.1) or inproc (direct calls)")
	fs.IntVar(&sc.Servers, "servers", sc.Servers, "number of servers, each its own model instance sharing one store")
	fs.Var(&sc.LB, "lb", "agents' load balancer over several servers: sticky or failover")
	fs.Var((*positive)(&sc.Deadline), "deadline", "longest run per model")
	fs.Var((*scryptBudget)(&sc.ScryptMemory), "scrypt-memory", "nodepass's scrypt budget per server (verify.Options.ScryptMemory): a `SIZE`, or none (default: verify's, a twelfth of the memory the process may use, at most 1GiB+1MiB)")
	fs.Var((*byteSize)(&sc.MaxHeap), "max-heap", "heap guard: stop a model whose heap in use passes this `SIZE` (e.g. 4GiB, 512MiB)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
	fs.StringVar(&c.jsonPath, "json", "", "write the results to `FILE`: a JSON array, one object per model")
	fs.StringVar(&c.plotPath, "plot", "", "draw joined nodes over time to `FILE` (.svg or .png)")
	fs.BoolVar(&c.wide, "wide", false, "print every figure in the table, past 100 columns, and the notes on arrivals, the split and shed answers")
	fs.Uint64Var(&sc.Seed, "seed", sc.Seed, "seed of the agents' random delays")
	fs.IntVar(&sc.BoundSample, "bound-sample", sc.BoundSample, "before each model, estimate the lower bound from this many verifications, under the run's own load (0: off)")
	fs.BoolVar(&c.isolate, "isolate", c.isolate, "run each model in its own child process")
	fs.StringVar(&c.cpuprofileDir, "cpuprofile-dir", "", "write each model's CPU and heap profiles of its run to `DIR`/MODEL.cpu.pprof and MODEL.heap.pprof, with DIR/herd.json and DIR/meta.json (go run ./cmd/profile reads them)")
	fs.IntVar(&sc.Attackers, "attackers", 0, "attacker agents sending wrong passwords for real node names, each as fast as answers come, ignoring Retry-After")
	fs.IntVar(&sc.TokenGuessers, "token-guessers", 0, "k3s agents with a wrong join token (a new random one per attempt, for the user node), asking beside the herd at its pace")
	fs.Var(&sc.AttackNames, "attack-names", "how attackers pick the names they guess for: sticky (one random name each, for the whole run) or random (a new one per guess)")
	fs.IntVar(&sc.Duplicates, "duplicates", 0, "nodes with a second machine of the same hostname and another password, retrying like the nodes all run long (it never joins; completion waits for the honest nodes only)")
	fs.Float64Var(&sc.StoreFaults, "store-faults", 0, "probability `P` that a store call (every model's hash fetch, nodepass's Get and Create) fails; the server answers 500 and the agent retries")
	fs.Float64Var(&c.spikes, "store-spikes", c.spikes, "probability `Q` that a store call that does not fail answers only after -fault-latency (-1: the -store-faults probability)")
	fs.Var((*positive)(&sc.StoreSpike), "fault-latency", "latency of a slow store call")
	fs.Var(&sc.Reboot, "reboot", "what restarted before the measured herd: none (a cold herd), agents (every node joined once before, unmeasured, the servers stayed up) or all (the same warm-up, then new servers over the same store)")
	fs.BoolVar(&c.digestKey, "digest-key", c.digestKey, "give every nodepass server of a run the same random DigestKey: what one verified, the others know through the store")
	fs.StringVar(&c.split, "split", c.split, "auto, on or off: run each model's agents and servers in two processes pinned to CPUs of their own (Linux, 2 CPUs or more; the lower bounds on the servers' CPUs); auto splits where the machine and the scenario allow, on fails for a scenario that cannot")
	fs.StringVar(&c.worker, "worker", "", "internal: run one model as a child process")
	fs.StringVar(&c.role, "worker-role", "", "internal: the child's part of a split run")
	return fs
}

func usage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "usage: bench [flags]\n       bench scale-plot -o FILE LABEL=GLOB... (bench scale-plot -h)\n       bench scale-table GLOB... (bench scale-table -h)\n\nRuns the herd benchmark: every node of a rebooted cluster asks at once to be\nverified, against each server model in turn. Flags:\n\n")
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "internal:") { // the parent-child protocol's, not for people
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

// modelList is -models: server models, or all.
type modelList []string

func (m *modelList) String() string { return strings.Join(*m, ",") }

func (m *modelList) Set(s string) error {
	if *m = nil; s == "all" {
		s = strings.Join(bench.Models(), ",")
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if err := bench.ValidModel(name); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "bench: "))
		}
		if !slices.Contains(*m, name) {
			*m = append(*m, name)
		}
	}
	return nil
}

// policies is -agent: agent kinds.
type policies []bench.Policy

func (p *policies) String() string {
	names := make([]string, len(*p))
	for i, a := range *p {
		names[i] = a.String()
	}
	return strings.Join(names, ",")
}

func (p *policies) Set(s string) error {
	*p = nil
	for _, name := range strings.Split(s, ",") {
		a, err := bench.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "bench: "))
		}
		*p = append(*p, a)
	}
	return nil
}

// positive is a flag value: a positive duration.
type positive time.Duration

func (d *positive) String() string { return time.Duration(*d).String() }

func (d *positive) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return errors.New("want a positive duration")
	}
	*d = positive(v)
	return nil
}

// years is a flag value: a duration given in years of 365 days.
type years time.Duration

const year = 365 * 24 * time.Hour

func (y *years) String() string { return strconv.FormatFloat(float64(*y)/float64(year), 'g', 3, 64) }

func (y *years) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) {
		return errors.New("want a number of years, more than 0")
	}
	*y = years(v * float64(year))
	return nil
}

// byteSize is a flag value: a positive size in bytes with an optional
// KiB, MiB, GiB (or K, M, G) suffix.
type byteSize uint64

func (b byteSize) String() string {
	switch v := uint64(b); {
	case v >= 1<<30 && v%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", v>>30)
	case v >= 1<<20 && v%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", v>>20)
	}
	return strconv.FormatUint(uint64(b), 10)
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
	if err != nil || v == 0 || v > (1<<63)>>shift {
		return fmt.Errorf("invalid size %q: want a positive number of bytes with an optional KiB, MiB or GiB suffix", s)
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
	return byteSize(*b).String()
}

func (b *scryptBudget) Set(s string) error {
	var size byteSize
	if s == "none" {
		*b = -1
		return nil
	} else if err := size.Set(s); err != nil {
		return err
	}
	*b = scryptBudget(size)
	return nil
}

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
	if c.version {
		fmt.Fprintln(stdout, "bench", buildinfo.Version())
		return 0
	}
	if c.worker != "" {
		return runWorker(ctx, c, stdin, stdout, stderr)
	}
	if err := runParent(ctx, c, args, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}
