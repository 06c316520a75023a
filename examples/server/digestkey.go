package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"

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
	// O_EXCL: two servers starting at once must not overwrite each
	// other's key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadDigestKey(path)
		}
		return nil, fmt.Errorf("server: -digest-key-file: %w", err)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, fmt.Errorf("server: -digest-key-file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("server: -digest-key-file: %w", err)
	}
	return key, nil
}
