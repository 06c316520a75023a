package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nodepass/nodepass/internal/atomicfile"
	"github.com/nodepass/nodepass/verify"
)

// loadDigestKey reads the remembered-digest key from path, or makes one of
// 32 random bytes there (mode 0600) when the file does not exist. An
// empty path means no key.
func loadDigestKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	key, err := os.ReadFile(path)
	switch {
	case err == nil:
		if len(key) < verify.MinDigestKeyLen {
			return nil, fmt.Errorf("server: -digest-key-file %s: %d bytes, want at least %d", path, len(key), verify.MinDigestKeyLen)
		}
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("server: -digest-key-file: %w", err)
	}
	key = make([]byte, verify.MinDigestKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("server: making a digest key: %w", err)
	}
	// Created, not replaced: two servers starting at once must not
	// overwrite each other's key. Created whole: a crash must not leave
	// an empty file that stops every later start.
	if err := atomicfile.CreateFile(path, key, 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadDigestKey(path)
		}
		return nil, fmt.Errorf("server: -digest-key-file: %w", err)
	}
	return key, nil
}
