// Package statefile writes files so that a crash never leaves half of
// one, and keeps the list of servers an agent knows across restarts.
// The agent's Client and its load balancer both use it.
package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nodepass/nodepass/internal/atomicfile"
)

// WriteFile writes data to path with mode perm, as atomicfile.WriteFile
// does: a reader, or a restart after a crash, sees the old file or the
// new one, never a part of either. Missing directories are created (mode
// 0700).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	if err := atomicfile.WriteFile(path, data, perm); err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	return nil
}

// Servers is what an agent knows of its servers: the one it was
// configured with and every address it has learnt since. Its JSON
// matches the file k3s's agent load balancer keeps
// (<data-dir>/etc/<name>.json), so either can read the other's.
type Servers struct {
	Default   string   `json:"ServerURL"`
	Addresses []string `json:"ServerAddresses"`
	// Saved is when the file was written (its modification time); Load
	// sets it.
	Saved time.Time `json:"-"`
	// Dropped are the entries of ServerAddresses that Load left out of
	// Addresses: not a host:port CheckAddress accepts. Callers log them.
	Dropped []string `json:"-"`
}

// For reports whether s was kept for the server at addr (host:port):
// whether its ServerURL, which k3s writes as a URL, names addr. A URL
// without a port names port 443.
func (s Servers) For(addr string) bool {
	def := s.Default
	if strings.Contains(def, "://") {
		u, err := url.Parse(def)
		if err != nil {
			return false
		}
		if def, err = HostPort(u); err != nil {
			return false
		}
	}
	return def == addr
}

// Empty reports whether s names no server at all.
func (s Servers) Empty() bool { return s.Default == "" && len(s.Addresses) == 0 }

// ErrCorrupt is wrapped by Load when the file exists but is not a
// server list.
var ErrCorrupt = errors.New("statefile: corrupt server list")

// maxFile bounds the state file read: a list of thousands of addresses
// is far less.
const maxFile = 1 << 20

// Load reads the server list at path. A missing file is an empty list
// and no error; a file that cannot be parsed or is too large is an error
// wrapping ErrCorrupt (callers log it and go on without the list). An
// address that CheckAddress refuses is left out, into Dropped.
func Load(path string) (Servers, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Servers{}, nil
	}
	if err != nil {
		return Servers{}, fmt.Errorf("statefile: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return Servers{}, fmt.Errorf("statefile: reading %s: %w", path, err)
	}
	if len(data) > maxFile {
		return Servers{}, fmt.Errorf("%w: %s is over %d bytes", ErrCorrupt, path, maxFile)
	}
	var s Servers
	if err := json.Unmarshal(data, &s); err != nil {
		return Servers{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if fi, err := f.Stat(); err == nil {
		s.Saved = fi.ModTime()
	}
	s.Addresses = slices.DeleteFunc(s.Addresses, func(a string) bool {
		if CheckAddress(a) != nil {
			s.Dropped = append(s.Dropped, a)
			return true
		}
		return false
	})
	return s, nil
}

// Save writes s to path atomically (see WriteFile), mode 0600.
func Save(path string, s Servers) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("statefile: %w", err)
	}
	return WriteFile(path, data, 0o600)
}
