package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestLoadDigestKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "digest.key")
	made, err := loadDigestKey(path)
	if err != nil || len(made) != 32 {
		t.Fatalf("made %d bytes, %v", len(made), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode())
	}
	again, err := loadDigestKey(path)
	if err != nil || !bytes.Equal(again, made) {
		t.Fatalf("read back %x (%v), want %x", again, err, made)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadDigestKey(path); err == nil {
		t.Fatal("a 5-byte key file was accepted")
	}
	if key, err := loadDigestKey(""); key != nil || err != nil {
		t.Fatalf("no path: %x, %v", key, err)
	}
}
