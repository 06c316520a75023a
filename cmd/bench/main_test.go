package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/bench"
)

// TestMain also lets the test binary stand in for the command when
// cmd/bench re-executes itself to run a model in a child process.
func TestMain(m *testing.M) {
	if os.Getenv("NODEPASS_BENCH_AS_MAIN") == "1" {
		main()
	}
	goleak.VerifyTestMain(m)
}

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-nodes", "0"}, "-nodes 0"},
		{[]string{"-logn", "31"}, "-logn 31"},
		{[]string{"-agent", "random"}, "unknown agent policy"},
		{[]string{"-models", "nodepass,k3s"}, "unknown model"},
		{[]string{"-mode", "grpc"}, "unknown mode"},
		{[]string{"-lb", "random"}, "unknown load balancer"},
		{[]string{"-servers", "0"}, "-servers 0"},
		{[]string{"-deadline", "-1s"}, "-deadline"},
		{[]string{"-timeout", "0s"}, "-timeout"},
		{[]string{"-max-heap", "lots"}, "invalid size"},
		{[]string{"-plot", "out.pdf"}, ".svg or .png"},
		{[]string{"-nodes", "x"}, "invalid value"},
		{[]string{"-frobnicate"}, "not defined"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"-agent", "nodepass,bogus"}, "unknown agent policy"},
		{[]string{"-servers", "2", "-hung", "2"}, "one server at least must answer"},
		{[]string{"-servers", "2", "-known", "3"}, "-known 3"},
		{[]string{"-certs", "old"}, "-certs"},
		{[]string{"-mode", "inproc", "-agent", "nodepass"}, "need -mode http"},
		{[]string{"-mode", "inproc", "-servers", "2", "-hung", "1"}, "need -mode http"},
		{[]string{"-token-guessers", "-1"}, "-token-guessers"},
		{[]string{"-ca-years", "10"}, "-ca-years 10"},
		{[]string{"-notbefore", "yesterday"}, `-notbefore "yesterday"`},
		// output paths are checked before the run, not after it (issue 37)
		{[]string{"-json", "no-such-dir/out.json"}, `-json "no-such-dir/out.json"`},
		{[]string{"-plot", "no-such-dir/herd.svg"}, `-plot "no-such-dir/herd.svg"`},
		{[]string{"-cpuprofile-dir", "main_test.go"}, `-cpuprofile-dir "main_test.go"`},
	} {
		code, stdout, stderr := runCmd(t, c.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "bench: ") {
			t.Errorf("bench %q: exit %d, stderr %q; want 2 and a message about %q", c.args, code, stderr, c.want)
		}
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runCmd(t, "-version")
	if code != 0 || !strings.HasPrefix(stdout, "bench ") || !strings.Contains(stdout, "go1.") || stderr != "" {
		t.Errorf("bench -version: exit %d, stdout %q, stderr %q; want 0 and the version on stdout", code, stdout, stderr)
	}
}

// TestCertificateFlags: the servers' CA and how they date certificates.
func TestCertificateFlags(t *testing.T) {
	c, err := parseFlags([]string{"-ca-years", "5", "-notbefore", "ca"}, nil)
	if err != nil || c.sc.CAAge != 5*365*24*time.Hour || !c.sc.CANotBefore {
		t.Errorf("-ca-years 5 -notbefore ca: %v, CA age %v, CA's NotBefore %v", err, c.sc.CAAge, c.sc.CANotBefore)
	}
	if c, _ := parseFlags(nil, nil); c.sc.CAAge != bench.DefaultCAAge || c.sc.CANotBefore {
		t.Errorf("default: CA age %v, CA's NotBefore %v; want %v, false", c.sc.CAAge, c.sc.CANotBefore, bench.DefaultCAAge)
	}
}

func TestHelpHidesWorkerFlag(t *testing.T) {
	code, _, stderr := runCmd(t, "-h")
	if code != 0 || !strings.Contains(stderr, "-max-heap") || strings.Contains(stderr, "-worker") {
		t.Errorf("exit %d, usage:\n%s", code, stderr)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]uint64{"4GiB": 4 << 30, "512MiB": 512 << 20, "64K": 64 << 10, "1000": 1000, "2G": 2 << 30} {
		var b byteSize
		if err := b.Set(in); err != nil || uint64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	b := byteSize(4 << 30)
	if b.String() != "4GiB" {
		t.Errorf("String() = %q", b.String())
	}
}

// TestRunInProcess runs two models in this process, with the JSON and the
// plot.
func TestRunInProcess(t *testing.T) {
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "out.json"), filepath.Join(dir, "herd.svg")
	code, stdout, stderr := runCmd(t, "-nodes", "12", "-logn", "5", "-mode", "inproc", "-isolate=false",
		"-models", "k3s-latest,nodepass", "-json", jsonPath, "-plot", plotPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"k3s-latest", "nodepass", "12/12", "ratio: time / the lower bound:", "More figures: bench -wide"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	checkColumns(t, stdout)
	for _, line := range strings.Split(stdout, "\n") {
		if len([]rune(line)) > lineWidth {
			t.Errorf("a line past %d columns:\n%s", lineWidth, line)
		}
	}
	results := readJSON(t, jsonPath)
	if len(results) != 2 || results[1]["model"] != "nodepass" || results[1]["joined"] != 12.0 {
		t.Errorf("JSON results: %v", results)
	}
	for _, key := range []string{"model", "nodes", "joined", "completion_s", "lower_bound_s", "ratio", "attempts",
		"requests", "tls_handshakes", "server_connections", "attempts_per_node", "requests_per_node", "tls_handshakes_per_node",
		"scrypt_runs", "p50_s", "p99_s", "max_s", "peak_heap_mib", "shed", "timeouts", "stopped", "timeline",
		"reached_first_s", "reached_median_s", "reached_last_s", "lower_bound_batch_s", "ratio_batch"} {
		if _, ok := results[0][key]; !ok {
			t.Errorf("JSON result lacks %q", key)
		}
	}
	if svg, err := os.ReadFile(plotPath); err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("plot: %v, %d bytes", err, len(svg))
	}
}

// TestRunIsolated runs every model in its own child process over HTTPS,
// agents and servers together: the test binary re-executes itself as the
// command.
func TestRunIsolated(t *testing.T) {
	t.Setenv("NODEPASS_BENCH_AS_MAIN", "1")
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCmd(t, "-nodes", "8", "-logn", "5", "-split", "off", "-json", jsonPath)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	results := readJSON(t, jsonPath)
	if len(results) != 4 {
		t.Fatalf("%d results, want 4\n%s", len(results), stdout)
	}
	for _, r := range results {
		if r["joined"] != 8.0 || r["stopped"] != "" || r["mode"] != "http" {
			t.Errorf("%v: joined %v stopped %q mode %v", r["model"], r["joined"], r["stopped"], r["mode"])
		}
		// A k3s agent's attempt over HTTPS: six requests, each a new TLS connection.
		if r["requests_per_node"].(float64) < 6 || r["tls_handshakes"] != r["requests"] || r["server_connections"] != r["requests"] {
			t.Errorf("%v: %v requests per node, %v requests, %v TLS handshakes, %v connections accepted",
				r["model"], r["requests_per_node"], r["requests"], r["tls_handshakes"], r["server_connections"])
		}
	}
}

func readJSON(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkColumns checks that the first table in out has a header cell for
// each cell of its rows (cells are 2 or more spaces apart). Its rows end
// at a blank line or a note ("model: ...").
func checkColumns(t *testing.T, out string) {
	t.Helper()
	cells := regexp.MustCompile(`\s{2,}`)
	var header []string
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := cells.Split(strings.TrimSpace(line), -1)
		if header == nil && f[0] == "model" {
			header = f
			continue
		}
		if header == nil {
			continue
		}
		if line == "" || strings.Contains(f[0], ": ") {
			break
		}
		rows++
		if len(f) != len(header) {
			t.Errorf("row has %d cells, header %d:\n%q\n%q", len(f), len(header), header, f)
		}
	}
	if header == nil || rows == 0 {
		t.Errorf("no table with rows in:\n%s", out)
	}
}

// TestAgentKinds runs two agent kinds against one model in one run, with
// a hung server the agents remember: a row each, named by model and
// agent; nodepass's agents all join, k3s's none.
func TestAgentKinds(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "out.json")
	code, stdout, stderr := runCmd(t, "-nodes", "8", "-logn", "5", "-isolate=false", "-split", "off", "-models", "nodepass",
		"-agent", "fixed-5s,nodepass", "-servers", "2", "-hung", "1", "-known", "1", "-deadline", "15s", "-json", jsonPath, "-wide")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	checkColumns(t, stdout)
	for _, want := range []string{"nodepass / fixed-5s", "nodepass / nodepass", "(1 hung, agents know 1)",
		"batch ratio: time / the lower bound with the Verifier's own scrypt, batched (scrypt.KeyBatch of",
		"nodepass / nodepass: first requests reached a server between"} {
		if !strings.Contains(unwrap(stdout)+stderr, want) {
			t.Errorf("output lacks %q:\n%s\n%s", want, stdout, stderr)
		}
	}
	got := map[string]float64{}
	for _, r := range readJSON(t, jsonPath) {
		got[r["agent"].(string)] = r["joined"].(float64)
		if r["hung"].(float64) != 1 || r["known"].(float64) != 1 {
			t.Errorf("result %v: want hung 1, known 1", r)
		}
	}
	if got["nodepass"] != 8 || got["fixed-5s"] != 0 {
		t.Errorf("joined by agent kind %v; want nodepass 8, fixed-5s 0", got)
	}
}
