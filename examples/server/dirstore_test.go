package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepass/nodepass/examples/internal/cli"
	"github.com/nodepass/nodepass/verify"
)

// startShared starts a server on dir's CAs, token and -store dir, with
// extra flags, sending the token.
func startShared(t *testing.T, dir string, extra ...string) *server {
	t.Helper()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte("join-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	args := append([]string{"-addr", "127.0.0.1:0", "-logn", "4", "-ca-file", caFile, "-data-dir", dir, "-token-file", tf, "-store", "dir"}, extra...)
	s := start(t, caFile, func(ctx context.Context, out io.Writer) error { return run(ctx, args, out, out) })
	s.token = "join-secret"
	return s
}

// TestSharedStore: two servers on one machine sharing -store dir (the
// README's demo) are one cluster to a node, as k3s's servers sharing
// their Secrets are: a node enrolled on one cannot get its certificates
// from the other under another password (403), and gets them with its
// own. Each node is one file, mode 0600, and no temporary file is left.
func TestSharedStore(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := startShared(t, dir), startShared(t, dir)
	n := nodes(2)[1]
	if status, body := s1.join(t, n.name, n.password, n.ip); status != http.StatusOK {
		t.Fatalf("%s on the first server: %d %s", n.name, status, body)
	}
	if status, body := s2.join(t, n.name, "another-"+n.password, "192.0.2.99"); status != http.StatusForbidden || bytes.Contains(body, []byte("CERTIFICATE")) {
		t.Errorf("%s with another password on the second server: %d %s, want 403", n.name, status, body)
	}
	if status, body := s2.join(t, n.name, n.password, n.ip); status != http.StatusOK {
		t.Errorf("%s with its password on the second server: %d %s", n.name, status, body)
	}
	// The second server verified against the first's hash: one scrypt
	// each, no enrollment on the second.
	if m := s2.metrics(t); m["nodepass_enrollments_total"] != 0 || m["nodepass_mismatches_total"] != 1 {
		t.Errorf("second server: enrollments %g, mismatches %g; want 0 and 1", m["nodepass_enrollments_total"], m["nodepass_mismatches_total"])
	}
	ents, err := os.ReadDir(filepath.Join(dir, "node-passwords"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != strings.ToLower(n.name)+".node-password.k3s" {
		t.Errorf("store dir holds %v, want %s.node-password.k3s alone", ents, strings.ToLower(n.name))
	}
	if fi, err := ents[0].Info(); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want 0600 (%v)", ents[0].Name(), fi.Mode(), err)
	}
}

// longestNode is a node name of 235 bytes, the longest the Verifier
// accepts: its secret's name, <node>.node-password.k3s, is then 253
// bytes, the most a DNS-1123 subdomain has (k3s
// pkg/nodepassword/nodepassword.go getSecretName). Its labels have 63
// bytes at most.
var longestNode = strings.Repeat(strings.Repeat("n", 63)+".", 3) + strings.Repeat("n", 43)

// TestSharedStoreDigests: with one -digest-key-file, a node verified on
// one server is verified on the other from the remembered digest, with
// no scrypt (verify.DigestStore over the shared files); so is a node of
// the longest name, whose files' names are 253 and 251 bytes, and no
// temporary file is left.
func TestSharedStoreDigests(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "digest.key")
	s1, s2 := startShared(t, dir, "-digest-key-file", key), startShared(t, dir, "-digest-key-file", key)
	for i, n := range []node{nodes(2)[1], {longestNode, "long-node-password", "192.0.2.235"}} {
		if status, body := s1.join(t, n.name, n.password, n.ip); status != http.StatusOK {
			t.Fatalf("%.20s... (%d bytes): %d %s", n.name, len(n.name), status, body)
		}
		digest := filepath.Join(dir, "node-passwords", strings.ToLower(n.name)+".node-digest.k3s")
		for i := 0; ; i++ { // recorded off the request path
			if _, err := os.Stat(digest); err == nil {
				break
			} else if i == 500 {
				t.Fatalf("no digest recorded: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := s2.metrics(t)["nodepass_scrypt_runs_total"]
		if status, body := s2.join(t, n.name, n.password, n.ip); status != http.StatusOK {
			t.Fatalf("%.20s... (%d bytes) on the second server: %d %s", n.name, len(n.name), status, body)
		}
		if m := s2.metrics(t); m["nodepass_digest_hits_total"] != float64(i+1) || m["nodepass_scrypt_runs_total"] != before {
			t.Errorf("%.20s... (%d bytes) on the second server: digest hits %g, scrypt runs %g more; want %d and 0",
				n.name, len(n.name), m["nodepass_digest_hits_total"], m["nodepass_scrypt_runs_total"]-before, i+1)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "node-passwords")); len(ents) != 4 {
		t.Errorf("store dir holds %v, want two nodes' hash and digest files alone", ents)
	}
}

// TestStoreFailureSaysWhy: when a node's file cannot be read, the 500's
// log line says why, for a node of the longest name too: the error names
// the node once (verify's part) and the cause within the line's clip.
func TestStoreFailureSaysWhy(t *testing.T) {
	dir := t.TempDir()
	s := startShared(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "node-passwords", longestNode+".node-password.k3s"), 0o700); err != nil {
		t.Fatal(err)
	}
	if status, body := s.join(t, longestNode, "long-node-password", "192.0.2.235"); status != http.StatusInternalServerError {
		t.Fatalf("a node whose hash file is a directory: %d %s, want 500", status, body)
	}
	line := regexp.MustCompile(`level=ERROR msg="httpauth: node password check failed" .*`).FindString(s.out.String())
	if !strings.Contains(line, "reading the node's hash file: read: is a directory") {
		t.Errorf("the 500's line does not say why: %q\n%s", line, s.out)
	}
}

// TestMemoryStoreAlone: -store memory keeps node passwords in one
// process, so a server with it refuses to start, with a usage error,
// beside another server on its -data-dir, and another refuses to start
// beside it; and so it does when -apiservers names other servers.
func TestMemoryStoreAlone(t *testing.T) {
	dir := t.TempDir()
	start(t, filepath.Join(dir, "ca.crt"), func(ctx context.Context, out io.Writer) error {
		return run(ctx, []string{"-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", dir, "-ca-file", filepath.Join(dir, "ca.crt")}, out, out)
	})
	for _, store := range []string{"memory", "dir"} {
		err := run(t.Context(), []string{"-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", dir, "-store", store}, io.Discard, io.Discard)
		var usage *cli.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), "-store memory") {
			t.Errorf("-store %s beside a -store memory server on one -data-dir: %v, want a usage error", store, err)
		}
	}
	// As a user runs it: one line, exit 2.
	code, _, stderr := runCommand(t, "-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", dir)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "server: -store memory: another server uses -data-dir "+dir) {
		t.Errorf("second -store memory server: exit %d, %q; want 2 and one line", code, stderr)
	}

	other := t.TempDir()
	startShared(t, other)
	code, _, stderr = runCommand(t, "-addr", "127.0.0.1:0", "-logn", "4", "-data-dir", other)
	if code != 2 || !strings.HasPrefix(stderr, "server: -store memory: another server uses -data-dir") {
		t.Errorf("-store memory beside a -store dir server: exit %d, %q; want 2", code, stderr)
	}
}

// TestMemoryStoreLine: started as the README's demo starts it (one
// server, -token-file, -data-dir, the default store), the server logs no
// warning, and says at Info that the hashes are kept in memory; given
// -store memory, it says nothing more of it than its ready line's
// store=memory.
func TestMemoryStoreLine(t *testing.T) {
	const line = `level=INFO msg="server: hashes are kept in memory (the default -store)`
	for _, c := range []struct {
		extra []string
		lines int
	}{{nil, 1}, {[]string{"-store", "memory"}, 0}} {
		s := startWithToken(t, "join-secret\n", "join-secret", c.extra...)
		out := s.out.String()
		if strings.Contains(out, "level=WARN") || strings.Count(out, line) != c.lines || !strings.Contains(out, "store=memory") {
			t.Errorf("%q: a warning, or not %d lines %s...:\n%s", c.extra, c.lines, line, out)
		}
	}
}

// TestDirStore: Create is exclusive across processes' stores (two
// dirStores on one directory, racing), Get reads the winner's hash, a
// missing node is verify.ErrNotFound, a name that would leave the
// directory is refused, and digests are bound to the hash.
func TestDirStore(t *testing.T) {
	dir := t.TempDir()
	a, err := openDirStore(dir, "k3s")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := openDirStore(dir, "k3s")
	ctx := t.Context()
	if _, err := a.Get(ctx, "worker-1"); !errors.Is(err, verify.ErrNotFound) {
		t.Errorf("Get of a missing node: %v, want ErrNotFound", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() { errs[i] = s.Create(ctx, "worker-1", fmt.Sprintf("$1:hash-%d", i)) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Errorf("Creates %d and %d both succeeded", winner, i)
		case !errors.Is(err, verify.ErrExists):
			t.Errorf("Create %d: %v, want ErrExists", i, err)
		}
	}
	for _, s := range []*dirStore{a, b} {
		if h, err := s.Get(ctx, "worker-1"); err != nil || h != fmt.Sprintf("$1:hash-%d", winner) {
			t.Errorf("Get: %q, %v; want the winner's hash, $1:hash-%d", h, err, winner)
		}
	}
	for _, name := range []string{"", "../x", "a/b", ".hidden"} {
		if err := a.Create(ctx, name, "$1:x"); !errors.Is(err, verify.ErrInvalidInput) {
			t.Errorf("Create(%q): %v, want ErrInvalidInput", name, err)
		}
	}

	h := fmt.Sprintf("$1:hash-%d", winner)
	if err := b.RememberDigest(ctx, "worker-1", "$1:other", []byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := b.RememberDigest(ctx, "worker-2", h, []byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, d, err := a.GetWithDigest(ctx, "worker-1"); err != nil || d != nil {
		t.Errorf("a digest for another hash was kept: %x, %v", d, err)
	}
	if err := b.RememberDigest(ctx, "worker-1", h, []byte{0xde, 0xad}); err != nil {
		t.Fatal(err)
	}
	if got, d, err := a.GetWithDigest(ctx, "worker-1"); err != nil || got != h || !bytes.Equal(d, []byte{0xde, 0xad}) {
		t.Errorf("GetWithDigest: %q %x %v", got, d, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("store holds %v, want the hash and the digest files alone", ents)
	}
}

// TestDirStoreLongestName: for k3s and rke2, the store keeps the hash
// and the digest of a node of the longest name (files of up to 254
// bytes), and refuses a name whose file would not fit a file name.
func TestDirStoreLongestName(t *testing.T) {
	ctx := t.Context()
	for _, program := range []string{"k3s", "rke2"} {
		s, err := openDirStore(t.TempDir(), program)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Create(ctx, longestNode, "$1:hash"); err != nil {
			t.Fatalf("%s: Create: %v", program, err)
		}
		if err := s.RememberDigest(ctx, longestNode, "$1:hash", []byte{1, 2}); err != nil {
			t.Fatalf("%s: RememberDigest: %v", program, err)
		}
		if h, d, err := s.GetWithDigest(ctx, longestNode); err != nil || h != "$1:hash" || !bytes.Equal(d, []byte{1, 2}) {
			t.Errorf("%s: GetWithDigest: %q %x %v", program, h, d, err)
		}
		tooLong := longestNode + strings.Repeat("n", 255-len(longestNode+".node-password."+program)+1)
		if err := s.Create(ctx, tooLong, "$1:hash"); !errors.Is(err, verify.ErrInvalidInput) {
			t.Errorf("%s: Create of a %d-byte name: %v, want ErrInvalidInput", program, len(tooLong), err)
		}
	}
}
