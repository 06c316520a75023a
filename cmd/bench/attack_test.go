package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/bench"
)

func TestBadAdversityFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-attackers", "-1"}, "-attackers -1"},
		{[]string{"-attack-names", "smart"}, "unknown attack names"},
		{[]string{"-nodes", "10", "-duplicates", "11"}, "-duplicates 11"},
		{[]string{"-store-faults", "1"}, "-store-faults 1"},
		{[]string{"-store-spikes", "2"}, "-store-spikes 2"},
		{[]string{"-fault-latency", "0s"}, "-fault-latency"},
	} {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and a message about %q", c.args, code, stderr, c.want)
		}
	}
}

func TestAdversityFlagsApply(t *testing.T) {
	c, err := parseFlags([]string{"-attackers", "200", "-attack-names", "random", "-duplicates", "32", "-store-faults", "0.3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := c.sc
	if sc.Attackers != 200 || sc.AttackNames != bench.AttackRandom || sc.Duplicates != 32 ||
		sc.StoreFaults != 0.3 || sc.StoreSpikes != 0.3 || sc.StoreSpike != bench.DefaultStoreSpike {
		t.Errorf("scenario %+v", sc)
	}
	if c, _ := parseFlags([]string{"-store-faults", "0.3", "-store-spikes", "0"}, nil); c.sc.StoreSpikes != 0 {
		t.Errorf("-store-spikes 0: spikes %v", c.sc.StoreSpikes)
	}
	if c, _ := parseFlags(nil, nil); c.sc.Attackers != 0 || c.sc.StoreFaults != 0 || c.sc.StoreSpikes != 0 || adversityNote(c.sc) != "" {
		t.Errorf("default scenario has adversity: %+v", c.sc)
	}
}

// TestAdversityRun runs attackers, duplicates and store faults in this
// process and checks the second table and the JSON.
func TestAdversityRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	// Backoff agents: a node that meets a store fault comes back within a
	// second, not 5-10 s.
	code, stdout, stderr := runCmd(t, "-nodes", "12", "-logn", "5", "-mode", "inproc", "-isolate=false", "-agent", "backoff",
		"-models", "k3s-latest,nodepass", "-attackers", "4", "-duplicates", "2", "-store-faults", "0.2",
		"-fault-latency", "1ms", "-json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"guess scrypt", "dup scrypt", "cached errors", "recheck", "12/12"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "!!!") {
		t.Errorf("the run reports a failure:\n%s", stdout)
	}
	for _, r := range readJSON(t, jsonPath) {
		a, _ := r["attack"].(map[string]any)
		f, _ := r["faults"].(map[string]any)
		if a["attackers"] != 4.0 || a["attack_names"] != "sticky" || a["guesses_accepted"] != 0.0 || f["cached_errors"] != 0.0 {
			t.Errorf("%v: attack %v, faults %v", r["model"], a, f)
		}
	}
}

// TestRunIsolatedAdversity checks that the worker processes get the
// adversity flags.
func TestRunIsolatedAdversity(t *testing.T) {
	t.Setenv("NODEPASS_BENCH_AS_MAIN", "1")
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	code, _, stderr := runCmd(t, "-nodes", "8", "-logn", "5", "-models", "nodepass", "-attackers", "2", "-json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	r := readJSON(t, jsonPath)[0]
	if a, _ := r["attack"].(map[string]any); a["attackers"] != 2.0 || r["joined"] != 8.0 {
		t.Errorf("result %v", r)
	}
	if _, ok := r["faults"]; ok {
		t.Error("faults figures without faults")
	}
}

func TestWrongAcceptFailsRun(t *testing.T) {
	var out bytes.Buffer
	res := []*bench.Result{{Model: "broken", Nodes: 1, Joined: 1, Attack: &bench.AttackResult{Attackers: 1, Guesses: 5, GuessesAccepted: 2}}}
	if err := writeAdversity(&out, res); err == nil || !strings.Contains(out.String(), "!!! broken ACCEPTED 2 WRONG PASSWORDS") {
		t.Errorf("error %v, output:\n%s", err, out.String())
	}
	if err := writeAdversity(&out, []*bench.Result{{Model: "plain"}}); err != nil {
		t.Error(err)
	}
}
