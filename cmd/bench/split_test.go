package main

import (
	"errors"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// TestSplitPlan checks where a run's two sides go, and that a split the
// machine or the scenario cannot have falls back to one process and says
// why.
func TestSplitPlan(t *testing.T) {
	cpus := func(c ...int) func() ([]int, error) { return func() ([]int, error) { return c, nil } }
	for _, c := range []struct {
		args            []string
		allowed         func() ([]int, error)
		agents, servers []int
		note            string
	}{
		{nil, cpus(0, 1), []int{1}, []int{0}, "agents on CPU 1 (GOMAXPROCS 1), servers on CPU 0 (GOMAXPROCS 1)"},
		{nil, cpus(0, 1, 2, 3), []int{2, 3}, []int{0, 1}, "agents on CPU 2,3 (GOMAXPROCS 2), servers on CPU 0,1 (GOMAXPROCS 2)"},
		{nil, cpus(4, 5, 6), []int{6}, []int{4, 5}, "servers on CPU 4,5 (GOMAXPROCS 2)"},
		{nil, cpus(3), nil, nil, "split: off, this process may use 1 CPU (3)"},
		{nil, func() ([]int, error) { return nil, errors.New("not Linux") }, nil, nil, "split: off, cannot pin processes here: not Linux"},
		{[]string{"-split", "off"}, cpus(0, 1), nil, nil, "split: off (-split off)"},
		{[]string{"-mode", "inproc"}, cpus(0, 1), nil, nil, "split: off: not with -mode inproc"},
		{[]string{"-attackers", "3"}, cpus(0, 1), nil, nil, "split: off: not with -attackers"},
		{[]string{"-isolate=false"}, cpus(0, 1), nil, nil, "split: off: not with -isolate=false"},
	} {
		cfg, err := parseFlags(c.args, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, note := planSplit(cfg, c.allowed)
		if !slices.Equal(p.agents, c.agents) || !slices.Equal(p.servers, c.servers) || !strings.Contains(note, c.note) {
			t.Errorf("%q: agents %v, servers %v, %q; want %v, %v, %q", c.args, p.agents, p.servers, note, c.agents, c.servers, c.note)
		}
		if !p.on() && !strings.Contains(note, "share") {
			t.Errorf("%q: %q does not say the sides share the CPUs", c.args, note)
		}
	}
}

func TestSplitFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-split", "maybe"}, `-split "maybe"`},
		{[]string{"-split", "on", "-duplicates", "2"}, "-split on: not with -duplicates"},
		{[]string{"-split", "on", "-mode", "inproc"}, "-split on: not with -mode inproc"},
	} {
		code, _, stderr := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestRunSplit runs two models split, each side in a child process pinned
// to its CPUs (the test binary re-executes itself as the command), and
// checks that each side reports the CPUs it was given, every thread of
// it, and the GOMAXPROCS to match; that the lower bounds were taken on
// the servers' CPUs; and the agents' counts.
func TestRunSplit(t *testing.T) {
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) < 2 {
		t.Skipf("no split here (CPUs %v, %v): TestSplitPlan checks the fallback", allowed, err)
	}
	t.Setenv("NODEPASS_BENCH_AS_MAIN", "1")
	cfg, err := parseFlags(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	plan, note := planSplit(cfg, allowedCPUs)
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCmd(t, "-nodes", "8", "-logn", "5", "-models", "nodepass,k3s-latest", "-split", "on", "-json", jsonPath, "-wide")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, note) || !strings.Contains(stdout, "on "+plural(len(plan.servers), "worker")+",") {
		t.Errorf("stderr lacks %q or the bound's workers are not the servers' %d CPUs:\n%s\n%s", note, len(plan.servers), stderr, stdout)
	}
	results := readJSON(t, jsonPath)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	ints := func(v any) (out []int) {
		for _, x := range v.([]any) {
			out = append(out, int(x.(float64)))
		}
		return out
	}
	for _, r := range results {
		sp, ok := r["split"].(map[string]any)
		if !ok {
			t.Fatalf("%v: no split in %v", r["model"], r)
		}
		agents, servers := ints(sp["agent_cpus"]), ints(sp["server_cpus"])
		if !slices.Equal(agents, plan.agents) || !slices.Equal(servers, plan.servers) ||
			sp["agent_procs"] != float64(len(plan.agents)) || sp["server_procs"] != float64(len(plan.servers)) || r["procs"] != sp["server_procs"] {
			t.Errorf("%v: agents on %v, servers on %v (%v); want %v and %v", r["model"], agents, servers, sp, plan.agents, plan.servers)
		}
		if sp["agent_cpu_s"].(float64) <= 0 {
			t.Errorf("%v: agents' CPU time %v", r["model"], sp["agent_cpu_s"])
		}
		wantScrypt := 2.0
		if r["model"] == bench.ModelNodepass {
			wantScrypt = 1
		}
		if r["joined"] != 8.0 || r["stopped"] != "" || r["requests_per_node"].(float64) < 6 ||
			r["tls_handshakes"] != r["requests"] || r["server_connections"] != r["requests"] || r["scrypt_runs_per_node"].(float64) < wantScrypt {
			t.Errorf("%v: %v", r["model"], r)
		}
	}
	if !strings.Contains(unwrap(stdout), "nodepass: agents ran on CPU "+cpuString(plan.agents)) || !strings.Contains(unwrap(stdout), "ms per connection accepted") {
		t.Errorf("the table does not say where the agents ran, or where the servers' CPU went:\n%s", stdout)
	}
}

// TestSplitSummaryNeverNegative: when the scrypt estimate taken before the
// run comes to more than the CPU time the run used (the machine was busier
// while measuring), the note gives no split instead of a negative "else"
// (issue 37: "-3.8s else, -9.56 ms per connection accepted").
func TestSplitSummaryNeverNegative(t *testing.T) {
	r := &bench.Result{
		Nodes: 320, Joined: 320, Completion: 5 * time.Second, CPU: 3 * time.Second,
		LocalBound: 4 * time.Second, ScryptRuns: 320, Connections: 3200,
		Split: &bench.Split{AgentCPUs: []int{1}, ServerCPUs: []int{0}, AgentProcs: 1, ServerProcs: 1},
	}
	s := splitSummary(r)
	if regexp.MustCompile(`-\d`).MatchString(s) || !strings.Contains(s, "no split") {
		t.Errorf("estimate above the CPU used: %q; want no split and no negative figure", s)
	}
	r.CPU = 6 * time.Second
	if s := splitSummary(r); !strings.Contains(s, "2.0s else, 0.62 ms per connection") {
		t.Errorf("estimate below the CPU used: %q; want 2.0s else, 0.62 ms per connection", s)
	}
}

func TestCPUString(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, "none"}, {[]int{0}, "0"}, {[]int{0, 1, 5}, "0,1,5"}} {
		if got := cpuString(c.in); got != c.want {
			t.Errorf("cpuString(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
