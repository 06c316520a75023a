//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nodepass/nodepass/internal/atomicfile"
)

// lockDataDir registers this server in dataDir until the returned
// function is called (or the process ends): shared when others may use
// dataDir too, exclusive when they may not (-store memory). It returns
// errDataDirShared when dataDir's lock is held the other way.
func lockDataDir(dataDir string, exclusive bool) (func(), error) {
	if err := atomicfile.MkdirAll(dataDir); err != nil {
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dataDir, "servers.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("server: -data-dir: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errDataDirShared
		}
		return nil, fmt.Errorf("server: -data-dir: lock: %w", err)
	}
	return func() { f.Close() }, nil
}
