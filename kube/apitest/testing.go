package apitest

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// Start runs a Server for t and stops it when t ends (t.Cleanup). It skips
// t when the binaries are not built ($NODEPASS_APISERVER_BIN unset or
// wrong), and fails it when they do not start.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Run(context.Background(), &Options{Dir: t.TempDir()})
	if errors.Is(err, ErrNoBinaries) {
		t.Skipf("needs a real kube-apiserver: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("API server logs:\n%s", s.Logs())
		}
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("kube-apiserver at %s ready after %v", s.URL, s.StartupTime.Round(1e6))
	return s
}

// Shared is one Server for every test of a test binary that asks for it,
// started by the first and stopped by Stop, which TestMain calls after
// the tests have run:
//
//	var apiserver apitest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		apiserver.Stop()
//		os.Exit(code)
//	}
//
// Starting kube-apiserver takes 20 s or more on a small machine; sharing
// one lets every test use it for that cost once.
type Shared struct {
	mu      sync.Mutex
	s       *Server
	err     error
	started bool
}

// Get returns the shared Server, starting it on the first call. It skips t
// when the binaries are not built, and fails t when the Server did not
// start (then and on every later call).
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.started {
		sh.started = true
		sh.s, sh.err = Run(context.Background(), nil)
		if sh.err == nil {
			t.Logf("kube-apiserver at %s ready after %v", sh.s.URL, sh.s.StartupTime.Round(1e6))
		}
	}
	switch {
	case errors.Is(sh.err, ErrNoBinaries):
		t.Skipf("needs a real kube-apiserver: %v", sh.err)
	case sh.err != nil:
		t.Fatal(sh.err)
	}
	return sh.s
}

// Stop stops the shared Server if one was started.
func (sh *Shared) Stop() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.s == nil {
		return nil
	}
	return sh.s.Stop()
}
