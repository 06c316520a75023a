package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodepass/nodepass/internal/atomicfile"
	"github.com/nodepass/nodepass/verify"
)

// dirStore is a verify.DigestStore in a directory that several server
// processes on one machine can share (-store dir): one file per node,
// named as k3s names the node's secret (<node>.node-password.<program>),
// holding its hash. A file is created whole or not at all, and only
// once (atomicfile.CreateFile), so of two servers enrolling one node at
// once the second gets verify.ErrExists and verifies against the
// first's hash, as with Kubernetes Secrets. Hash files are never changed;
// deleting one lets its node enroll again. A remembered digest is a
// second file, <node>.node-digest.<program>, replaced whole
// (atomicfile.WriteFile), holding the hash it is bound to and the
// digest. Both names fit a file name (255 bytes) for every node name the
// Verifier accepts (235 bytes). It is safe for concurrent use.
type dirStore struct {
	dir     string
	program string
}

// openDirStore returns the store in dir, making dir (mode 0700) if it
// does not exist.
func openDirStore(dir, program string) (*dirStore, error) {
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("server: -store-dir: %w", err)
	}
	return &dirStore{dir: dir, program: program}, nil
}

// maxFileName is the most bytes a file name may have (Linux, and most
// file systems).
const maxFileName = 255

// path returns the file of node's hash (what "node-password") or of its
// digest ("node-digest"). Names the Verifier passes are DNS-1123
// subdomains; any other that would leave dir, or whose file's name would
// not fit, is refused.
func (s *dirStore) path(node, what string) (string, error) {
	name := node + "." + what + "." + s.program
	if node == "" || node[0] == '.' || strings.ContainsAny(node, `/\`) || len(name) > maxFileName {
		return "", fmt.Errorf("server: store dir: %w: node name %q", verify.ErrInvalidInput, node)
	}
	return filepath.Join(s.dir, name), nil
}

// fileError is err, a failure on one of the store's files, told by what
// failed and why, without the file's name: verify's error names the
// node (`verify: store Create("<node>"): ...`), and the file's name
// repeats it (up to 254 bytes), which would push the cause past the end
// of a log line's clip (logbudget.MaxError).
func (s *dirStore) fileError(what string, err error) error {
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	switch {
	case errors.As(err, &pathErr):
		err = fmt.Errorf("%s: %w", pathErr.Op, pathErr.Err)
	case errors.As(err, &linkErr):
		err = fmt.Errorf("%s: %w", linkErr.Op, linkErr.Err)
	}
	return fmt.Errorf("server: store dir %s: %s: %w", s.dir, what, err)
}

// Get implements verify.Store: it reads node's file.
func (s *dirStore) Get(_ context.Context, node string) (string, error) {
	p, err := s.path(node, "node-password")
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %q", verify.ErrNotFound, node)
	case err != nil:
		return "", s.fileError("reading the node's hash file", err)
	}
	hash := strings.TrimSpace(string(b))
	if hash == "" {
		return "", fmt.Errorf("server: store dir %s: the node's hash file is empty", s.dir)
	}
	return hash, nil
}

// Create implements verify.Store: it creates node's file holding hash, or
// fails wrapping verify.ErrExists if it exists.
func (s *dirStore) Create(_ context.Context, node, hash string) error {
	p, err := s.path(node, "node-password")
	if err != nil {
		return err
	}
	if err := atomicfile.CreateFile(p, []byte(hash+"\n"), 0o600); errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %q", verify.ErrExists, node)
	} else if err != nil {
		return s.fileError("creating the node's hash file", err)
	}
	return nil
}

// GetWithDigest implements verify.DigestStore: Get, and the digest
// remembered for node while its hash is the one read.
func (s *dirStore) GetWithDigest(ctx context.Context, node string) (string, []byte, error) {
	hash, err := s.Get(ctx, node)
	if err != nil {
		return "", nil, err
	}
	p, _ := s.path(node, "node-digest") // Get checked node with the longer name
	b, err := os.ReadFile(p)
	if err != nil {
		return hash, nil, nil // none remembered, or unreadable: scrypt decides
	}
	bound, digest, _ := bytes.Cut(bytes.TrimSpace(b), []byte("\n"))
	d, err := hex.DecodeString(string(digest))
	if string(bound) != hash || err != nil {
		return hash, nil, nil
	}
	return hash, d, nil
}

// RememberDigest implements verify.DigestStore: it replaces node's digest
// while node's hash is hash, and does nothing otherwise.
func (s *dirStore) RememberDigest(ctx context.Context, node, hash string, digest []byte) error {
	current, err := s.Get(ctx, node)
	if errors.Is(err, verify.ErrNotFound) || err == nil && current != hash {
		return nil
	}
	if err != nil {
		return err
	}
	p, _ := s.path(node, "node-digest")
	if err := atomicfile.WriteFile(p, []byte(hash+"\n"+hex.EncodeToString(digest)+"\n"), 0o600); err != nil {
		return s.fileError("writing the node's digest file", err)
	}
	return nil
}
