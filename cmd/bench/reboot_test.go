package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/bench"
)

func TestRebootFlags(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-reboot", "servers")
	if code != 2 || stdout != "" || !strings.Contains(stderr, "unknown reboot") {
		t.Errorf("-reboot servers: exit %d, stderr %q", code, stderr)
	}
	c, err := parseFlags([]string{"-reboot", "agents", "-digest-key=false"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.sc.Reboot != bench.RebootAgents || !c.sc.NoDigestKey {
		t.Errorf("scenario %+v", c.sc)
	}
	if c, _ := parseFlags(nil, nil); c.sc.Reboot != bench.RebootNone || c.sc.NoDigestKey {
		t.Errorf("default scenario: reboot %q, no digest key %v", c.sc.Reboot, c.sc.NoDigestKey)
	}
}

// TestRebootRun runs -reboot all in this process and checks the table,
// the summary lines and the JSON: nodepass needs no scrypt (a digest
// answers each node's first certificate request, its cache the second
// and the join token of all seven authenticated requests), k3s-latest
// nine per node (seven tokens, two node passwords).
func TestRebootRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCmd(t, "-nodes", "12", "-logn", "5", "-mode", "inproc", "-isolate=false",
		"-models", "k3s-latest,nodepass", "-reboot", "all", "-servers", "3", "-lb", "failover", "-json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"digest hits", "ratio to cold", "warm-up scrypt",
		"nodepass: reboot all: 0 scrypt during the herd (12 digest hits, 96 cache hits); 12/12 joined, 12 on their first attempt",
		"k3s-latest: reboot all: 108 scrypt during the herd"} {
		if !strings.Contains(unwrap(stdout), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "new servers over the same store") {
		t.Errorf("stderr does not describe the reboot:\n%s", stderr)
	}
	for _, r := range readJSON(t, jsonPath) {
		if r["reboot"] != "all" {
			t.Errorf("%v: reboot %v", r["model"], r["reboot"])
		}
		switch r["model"] {
		case bench.ModelNodepass:
			if r["scrypt_runs"] != 0.0 || r["digest_hits"] != 12.0 || r["digest_key"] != true || r["warmup_scrypt"] != 12.0 || r["first_attempt_joins"] != 12.0 {
				t.Errorf("nodepass: %v", r)
			}
		default:
			if r["scrypt_runs"].(float64) < 24 || r["digest_hits"] != 0.0 || r["digest_key"] != false || r["warmup_scrypt"] != 0.0 {
				t.Errorf("%v: %v", r["model"], r)
			}
		}
	}
}
