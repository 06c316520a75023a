//go:build linux

package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWritesDurable runs the server command under strace, as a user runs
// it with -data-dir, -store dir, -digest-key-file and -ca-file, joins a
// node and stops it, and checks every file the server wrote for a
// restart to read (the CA directory, the digest key, the node's hash and
// its remembered digest, the CA file): each reached its name by a rename
// or a link of a file (or a directory of files) synced before, and its
// directory was synced after; none was written in place. A crash or a
// power loss then leaves the old content or the new, never a torn or
// empty file (internal/atomicfile's TestKilledAtEachStep kills a writer
// at each step).
func TestWritesDurable(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace")
	}
	dir := t.TempDir()
	tf, caFile, keyFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt"), filepath.Join(dir, "digest.key")
	if err := os.WriteFile(tf, []byte("join-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(t.TempDir(), "trace")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, strace, "-f", "-y", "-qq", "-s", "4096", "-o", trace,
		"-e", "trace=open,openat,creat,fsync,fdatasync,rename,renameat,renameat2,link,linkat",
		os.Args[0], "-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", dir, "-store", "dir", "-token-file", tf,
		"-digest-key-file", keyFile, "-ca-file", caFile, "-ca-chain")
	cmd.Env = append(os.Environ(), asCommand+"=1")
	r := startCommand(t, cmd)
	if !strings.HasPrefix(r.listening, "listening on https://") {
		if strings.Contains(r.stderr.String(), "ptrace") {
			t.Skipf("strace cannot trace here: %s", r.stderr)
		}
		t.Fatalf("no listening line; stderr:\n%s", r.stderr)
	}
	s := &server{url: "https://" + strings.TrimPrefix(r.listening, "listening on https://"), client: trusting(t, caFile), token: "join-secret"}
	_, csr := newCSR(t, "worker-1")
	if resp, body := s.send(t, http.MethodPost, "/v1-k3s/serving-kubelet.crt", "worker-1", "worker-1-password", "192.0.2.1", csr); resp.StatusCode != http.StatusOK {
		t.Fatalf("join: %d %s", resp.StatusCode, body)
	}
	// The server is strace's child; SIGINT makes it flush the digest and
	// exit, and strace with it.
	children, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/task/" + strconv.Itoa(cmd.Process.Pid) + "/children")
	pid, perr := strconv.Atoi(strings.Fields(string(children) + " x")[0])
	if err != nil || perr != nil {
		t.Fatalf("the server's pid under strace: %v %v", err, perr)
	}
	syscall.Kill(pid, syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("server under strace: %v; stderr:\n%s", err, r.stderr)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	events := parseTrace(string(b), dir)
	placed := checkDurable(t, events, dir)
	for _, want := range []string{filepath.Join(dir, "tls"), keyFile, caFile,
		filepath.Join(dir, "node-passwords", "worker-1.node-password.k3s"), filepath.Join(dir, "node-passwords", "worker-1.node-digest.k3s")} {
		if !slices.Contains(placed, want) {
			t.Errorf("%s was not put in place by a rename or a link; placed: %q", want, placed)
		}
	}
}

// traceEvent is one completed system call of a strace log.
type traceEvent struct {
	call     string // "create", "sync", "rename" (link too)
	path     string // created or synced; the old name of a rename
	new      string // the new name of a rename
	position int    // in the log, when the call returned
}

var (
	traceLine   = regexp.MustCompile(`^(\d+) +(.*)$`)
	traceCall   = regexp.MustCompile(`^(\w+)\((.*)\) += (-?\d+)(<[^>]*>)?`)
	traceQuoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
	traceFdPath = regexp.MustCompile(`^\d+<([^>]*)>`)
)

// parseTrace reads the calls of a `strace -f -y` log that succeeded on
// dir and the paths under it, joining calls split by other threads'
// lines.
func parseTrace(log, dir string) []traceEvent {
	var events []traceEvent
	pending := map[string]string{} // pid -> the start of an unfinished call
	for i, line := range strings.Split(log, "\n") {
		m := traceLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		pid, rest := m[1], m[2]
		if head, ok := strings.CutSuffix(rest, " <unfinished ...>"); ok {
			pending[pid] = head
			continue
		}
		if strings.HasPrefix(rest, "<... ") {
			_, tail, _ := strings.Cut(rest, " resumed>")
			rest = pending[pid] + tail
			delete(pending, pid)
		}
		c := traceCall.FindStringSubmatch(rest)
		if c == nil || strings.HasPrefix(c[3], "-") {
			continue // a signal, an exit, or a call that failed
		}
		name, args, fdPath := c[1], c[2], strings.Trim(c[4], "<>")
		quoted := traceQuoted.FindAllStringSubmatch(args, -1)
		e := traceEvent{position: i}
		switch name {
		case "open", "openat", "creat":
			if name != "creat" && !strings.Contains(args, "O_CREAT") {
				continue
			}
			e.call, e.path = "create", fdPath
		case "fsync", "fdatasync":
			fm := traceFdPath.FindStringSubmatch(args)
			if fm == nil {
				continue
			}
			e.call, e.path = "sync", fm[1]
		case "rename", "renameat", "renameat2", "link", "linkat":
			if len(quoted) < 2 {
				continue
			}
			e.call, e.path, e.new = "rename", quoted[0][1], quoted[1][1]
		default:
			continue
		}
		if e.path == dir || strings.HasPrefix(e.path, dir+string(filepath.Separator)) {
			events = append(events, e)
		}
	}
	return events
}

// checkDurable checks the rule of internal/atomicfile on events and
// returns the names put in place.
func checkDurable(t *testing.T, events []traceEvent, dir string) (placed []string) {
	t.Helper()
	syncedAfter := func(path string, pos int) bool {
		return slices.ContainsFunc(events, func(e traceEvent) bool { return e.call == "sync" && e.path == path && e.position > pos })
	}
	syncedBefore := func(path string, pos int) bool {
		return slices.ContainsFunc(events, func(e traceEvent) bool { return e.call == "sync" && e.path == path && e.position < pos })
	}
	temporary := func(path string) bool {
		rel, _ := filepath.Rel(dir, path)
		return slices.ContainsFunc(strings.Split(rel, string(filepath.Separator)), func(part string) bool { return strings.HasPrefix(part, ".") })
	}
	for _, e := range events {
		switch {
		case e.call == "create" && !temporary(e.path) && filepath.Base(e.path) != "servers.lock":
			t.Errorf("%s was written in place, not renamed into it", e.path)
		case e.call == "rename":
			placed = append(placed, e.new)
			written := []string{e.path}
			for _, c := range events {
				if c.call == "create" && strings.HasPrefix(c.path, e.path+string(filepath.Separator)) && c.position < e.position {
					written = append(written, c.path) // a file of a directory renamed
				}
			}
			for _, w := range written {
				if !syncedBefore(w, e.position) {
					t.Errorf("%s was not synced before it was renamed to %s", w, e.new)
				}
			}
			if !syncedAfter(filepath.Dir(e.new), e.position) {
				t.Errorf("%s was not synced after %s was renamed into it", filepath.Dir(e.new), filepath.Base(e.new))
			}
		}
	}
	if len(events) == 0 {
		t.Error(errors.New("no call in the trace"))
	}
	return placed
}
