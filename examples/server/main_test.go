package main

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/examples/internal/cli/clitest"
)

// asCommand, set in a test binary's environment, makes it the server
// command: TestMain runs main with the binary's arguments.
const asCommand = "NODEPASS_TEST_RUN_SERVER_MAIN"

func TestMain(m *testing.M) { clitest.Main(m, asCommand, main) }

// commandWith returns the server command with args, as a user runs it:
// this test binary, running main.
func commandWith(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return clitest.Command(t, ctx, asCommand, args...)
}

// runCommand runs the server command with args to its end, within a
// minute, and returns its exit code, stdout and stderr.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, asCommand, args...)
}

// TestCommandLine runs the command as a user does: -h and -version print
// to stdout and exit 0; every wrong flag or value prints one line on
// stderr and exits 2; a failure prints one line and exits 1, with no
// line before it (where the hashes are kept is said with the ready line).
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	aFile, shortKey := filepath.Join(dir, "file"), filepath.Join(dir, "short.key")
	if err := os.WriteFile(aFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shortKey, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	start := []string{"-addr", "127.0.0.1:0", "-logn", "4"}
	for _, c := range []struct {
		args   []string
		code   int
		stdout string // its start
		line   string // stderr's only line; its start
	}{
		{[]string{"-h"}, 0, "Usage of server:", ""},
		{[]string{"-help"}, 0, "Usage of server:", ""},
		{[]string{"-version"}, 0, "server ", ""},
		{[]string{"-nope"}, 2, "", "server: flag provided but not defined: -nope"},
		{[]string{"extra"}, 2, "", `server: unexpected arguments ["extra"]`},
		{[]string{"-store", "etcd"}, 2, "", `server: -store "etcd": want `},
		{[]string{"-program", "k8s"}, 2, "", `server: -program "k8s": want k3s or rke2`},
		{[]string{"-addr", "not an address"}, 2, "", `server: -addr "not an address": `},
		{[]string{"-addr", "127.0.0.1:99999"}, 2, "", `server: -addr "127.0.0.1:99999": port "99999" is not a number`},
		{[]string{"-apiservers", "10.0.0.1"}, 2, "", `server: -apiservers "10.0.0.1": `},
		{[]string{"-shutdown-timeout", "-1s"}, 2, "", "server: -shutdown-timeout -1s: want 0 or more"},
		{[]string{"-sync-timeout", "0s"}, 2, "", "server: -sync-timeout 0s: want more than 0"},
		{[]string{"-max-concurrent", "-1"}, 2, "", "server: -max-concurrent -1: want 0"},
		{[]string{"-namespace", ""}, 2, "", "server: -namespace is empty"},
		{[]string{"-tls-san", "*"}, 2, "", `server: -tls-san "*": a wildcard`},
		{[]string{"-tls-san", "api.example.com,*.example.com"}, 2, "", `server: -tls-san "*.example.com": a wildcard`},
		{[]string{"-tls-san", "api example"}, 2, "", `server: -tls-san "api example": not a DNS name`},
		{[]string{"-logn", "0", "-addr", "127.0.0.1:0"}, 2, "", "server: -logn 0: verify: Options.Params: verify: invalid params: LogN 0 out of range"},
		{[]string{"-not-before", "now"}, 2, "", `server: -not-before "now": want recent or ca`},
		{[]string{"-ca-age-years", "10"}, 2, "", "server: -ca-age-years 10: want 0 to 9"},
		{[]string{"-ca-age-years", "-1"}, 2, "", "server: -ca-age-years -1: want 0 to 9"},
		{[]string{"-apiserver-port", "70000"}, 2, "", "server: -apiserver-port 70000: want 0 to 65535"},
		{[]string{"-store", "dir"}, 2, "", "server: -store dir: give -store-dir or -data-dir"},
		{[]string{"-apiservers", "127.0.0.1:9345,127.0.0.1:9346"}, 2, "", "server: -store memory with -apiservers naming 2 servers: node passwords in memory are not shared"},
		{[]string{"-logn", "x"}, 2, "", `server: invalid value "x" for flag -logn: parse error`},
		{[]string{"-store", "kube", "-kubeconfig", missing}, 1, "", "server: kubeconfig: "},
		{append(start, "-token-file", missing), 1, "", "server: -token-file: open " + missing + ": no such file or directory"},
		{append(start, "-data-dir", filepath.Join(aFile, "sub")), 1, "", "server: -data-dir: mkdir " + aFile + ": not a directory"},
		{append(start, "-digest-key-file", shortKey), 1, "", "server: -digest-key-file " + shortKey + ": 3 bytes, want at least 32"},
		{[]string{"-addr", taken.Addr().String(), "-logn", "4"}, 1, "", "server: listen tcp " + taken.Addr().String() + ": bind: address already in use"},
	} {
		code, stdout, stderr := runCommand(t, c.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != c.code || !strings.HasPrefix(stdout, c.stdout) || (c.line == "" && stderr != "") ||
			(c.line != "" && (len(lines) != 1 || !strings.HasPrefix(lines[0], c.line))) {
			t.Errorf("server %q: exit %d, stdout %.80q, stderr %q; want exit %d, stdout %q..., one line %q...",
				c.args, code, stdout, stderr, c.code, c.stdout, c.line)
		}
	}
}

// TestCommandLogsToStderr: the server's log goes to stderr, as the
// agent's; stdout has the line saying where it listens. SIGINT stops it
// with exit 0.
func TestCommandLogsToStderr(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	r := startCommand(t, commandWith(ctx, t, "-addr", "127.0.0.1:0", "-logn", "4"))
	if !strings.HasPrefix(r.listening, "listening on https://127.0.0.1:") {
		t.Errorf("stdout's first line %q, want listening on ...", r.listening)
	}
	more, err := r.stop()
	if err != nil {
		t.Errorf("after SIGINT: %v; stderr:\n%s", err, r.stderr)
	}
	if len(more) > 0 {
		t.Errorf("stdout has more: %q", more)
	}
	if log := r.stderr.String(); !strings.Contains(log, `msg="server: ready"`) || !strings.Contains(log, `msg="server: shutting down"`) {
		t.Errorf("stderr has no log of the start and the shutdown:\n%s", log)
	}
}

// TestCommandRefusedCertificateRequest runs the command as a user does
// and POSTs a kubelet certificate request with no CSR: the node's
// password is checked (and stored, as k3s's node authorizer stores it
// before its handler reads the body), the answer is 400, and the log has
// one line for the 400 and no enrollment; the node's next request, with
// a CSR, gets its certificate and logs the enrollment. (k3s
// pkg/server/handlers/handlers.go signAndSend: "If the client did not
// submit a signing request, the legacy shared key is used"; this server
// keeps no shared key and refuses.)
func TestCommandRefusedCertificateRequest(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	r := startCommand(t, commandWith(ctx, t, "-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile))
	if !strings.HasPrefix(r.listening, "listening on https://") {
		t.Fatalf("stdout's first line %q; stderr:\n%s", r.listening, r.stderr)
	}
	s := &server{url: "https://" + strings.TrimPrefix(r.listening, "listening on https://"), client: trusting(t, caFile)}
	stderr := r.stderr
	n := nodes(2)[1]
	resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", n.name, n.password, n.ip, nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST with no CSR: %d %s, want 400", resp.StatusCode, body)
	}
	_, csr := newCSR(t, n.name)
	if resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", n.name, n.password, n.ip, csr); resp.StatusCode != http.StatusOK {
		t.Errorf("POST with a CSR: %d %s, want 200", resp.StatusCode, body)
	}
	if _, err := r.stop(); err != nil {
		t.Fatalf("after SIGINT: %v; stderr:\n%s", err, stderr)
	}
	// The server logs each line before it answers, so the log's order is
	// the requests'.
	node, log := strings.ToLower(n.name), stderr.String()
	refused := regexp.MustCompile(`level=WARN msg="server: certificate request refused" status=400 node=`+node+` reason="no certificate request in the body" remote=127\.0\.0\.1:\d+\n`).FindAllStringIndex(log, -1)
	enrolled := regexp.MustCompile(`level=INFO msg="server: node enrolled" node=`+node+` `).FindAllStringIndex(log, -1)
	if len(refused) != 1 || len(enrolled) != 1 || enrolled[0][0] < refused[0][0] {
		t.Errorf("%d lines for the 400 and %d enrollments, want 1 and 1 after it:\n%s", len(refused), len(enrolled), log)
	}
}

// running is a server command that startCommand started.
type running struct {
	cmd       *exec.Cmd
	stdout    *bufio.Scanner // past the first line
	stderr    *output
	listening string // stdout's first line
}

// startCommand starts cmd, a server command as commandWith makes it, and
// returns once it has printed its first line on stdout, or ended.
func startCommand(t *testing.T, cmd *exec.Cmd) *running {
	t.Helper()
	r := &running{cmd: cmd, stderr: newOutput()}
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.stdout = bufio.NewScanner(stdout)
	if r.stdout.Scan() {
		r.listening = r.stdout.Text()
	} else {
		cmd.Wait() // ended before it printed a line
	}
	return r
}

// stop interrupts the command (SIGINT), as a user stops it, and returns
// the lines it printed on stdout after the first, and how it ended.
func (r *running) stop() (more []string, err error) {
	r.cmd.Process.Signal(os.Interrupt)
	for r.stdout.Scan() {
		more = append(more, r.stdout.Text())
	}
	return more, r.cmd.Wait()
}
