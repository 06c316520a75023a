package httpauth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errMismatch = verify.ErrMismatchedHashAndPassword

// verifierFunc adapts a function to httpauth.Verifier.
type verifierFunc func(ctx context.Context, node, password string) error

func (f verifierFunc) Ensure(ctx context.Context, node, password string) error {
	return f(ctx, node, password)
}

// newServer starts an HTTPS test server with v behind Auth; the handler
// echoes the verified node.
func newServer(t *testing.T, v httpauth.Verifier, opts *httpauth.Options) *httptest.Server {
	t.Helper()
	a, err := httpauth.New(v, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, ok := httpauth.NodeFromContext(r.Context())
		if !ok {
			http.Error(w, "no node in context", http.StatusTeapot)
			return
		}
		fmt.Fprintf(w, "%s %s", n.Name, n.IP)
	})))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, srv *httptest.Server, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1-k3s/serving-kubelet.crt", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestStatusCodes(t *testing.T) {
	overload := &verify.OverloadError{After: 2100 * time.Millisecond, Queued: true}
	secret := errors.New("etcd at 10.0.0.7 refused: secret-internal-detail")
	tests := []struct {
		name       string
		hdr        map[string]string
		err        error
		wantStatus int
		wantRetry  string
		wantBody   string
	}{
		{"ok", map[string]string{"K3s-Node-Name": "Node-A", "K3s-Node-Password": "pw", "K3s-Node-Ip": "10.1.2.3"}, nil, 200, "", "node-a 10.1.2.3"},
		{"no name", map[string]string{"K3s-Node-Password": "pw"}, nil, 400, "", "missing K3s-Node-Name"},
		{"no password", map[string]string{"K3s-Node-Name": "a"}, nil, 400, "", "missing K3s-Node-Password"},
		{"mismatch", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, verify.ErrMismatchedHashAndPassword, 403, "", "rejected"},
		{"wrapped mismatch", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, fmt.Errorf("x: %w", verify.ErrMismatchedHashAndPassword), 403, "", "rejected"},
		{"invalid input", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, fmt.Errorf("%w: password is 2000 bytes, limit 1024", verify.ErrInvalidInput), 400, "", "invalid node name or password"},
		{"invalid input from the store", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, fmt.Errorf("verify: store Get(\"a\"): kube: %w: must match regex [a-z0-9]: %w", verify.ErrInvalidInput, secret), 400, "", "invalid node name or password"},
		{"unknown", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, verify.ErrNotFound, 401, "", "unknown node"},
		{"overloaded", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, overload, 503, "3", "busy"},
		{"overloaded sentinel only", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, verify.ErrOverloaded, 503, "1", "busy"},
		{"store failure", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, secret, 500, "", "internal error"},
		{"corrupt hash", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, fmt.Errorf("%w: salt is not hex", verify.ErrInvalidHash), 403, "", "rejected"},
		{"closed", map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}, verify.ErrClosed, 503, "1", "shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			var called bool
			v := verifierFunc(func(_ context.Context, node, password string) error {
				called = true
				if node != strings.ToLower(node) {
					t.Errorf("node %q not lower-cased", node)
				}
				return tt.err
			})
			srv := newServer(t, v, &httpauth.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			resp, body := get(t, srv, tt.hdr)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tt.wantStatus, body)
			}
			if got := resp.Header.Get("Retry-After"); got != tt.wantRetry {
				t.Errorf("Retry-After %q, want %q", got, tt.wantRetry)
			}
			if !strings.Contains(body, tt.wantBody) {
				t.Errorf("body %q does not contain %q", body, tt.wantBody)
			}
			if strings.Contains(body, "secret-internal-detail") || strings.Contains(body, "regex") || strings.Contains(body, "limit") {
				t.Errorf("body leaks the error's details: %q", body)
			}
			if tt.err != nil && !errors.Is(tt.err, verify.ErrMismatchedHashAndPassword) && !errors.Is(tt.err, verify.ErrNotFound) &&
				!errors.Is(tt.err, verify.ErrOverloaded) && !errors.Is(tt.err, verify.ErrClosed) && !strings.Contains(logs.String(), "err=") {
				t.Errorf("details of %v not logged: %q", tt.err, logs.String())
			}
			if tt.wantStatus == 400 && called && tt.err == nil {
				t.Error("Verifier called for a request with missing headers")
			}
			if tt.wantStatus == 500 && !strings.Contains(logs.String(), "node password check failed") {
				t.Errorf("server failure not logged: %q", logs.String())
			}
		})
	}
}

func TestDuplicateHeaders(t *testing.T) {
	v := verifierFunc(func(context.Context, string, string) error {
		t.Error("Verifier called for a request with duplicate headers")
		return nil
	})
	srv := newServer(t, v, nil)
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Add("K3s-Node-Name", "a")
	req.Header.Add("K3s-Node-Name", "b")
	req.Header.Set("K3s-Node-Password", "pw")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}

func TestProgramPrefix(t *testing.T) {
	var gotNode string
	v := verifierFunc(func(_ context.Context, node, _ string) error { gotNode = node; return nil })
	srv := newServer(t, v, &httpauth.Options{Program: "rke2"})
	if resp, _ := get(t, srv, map[string]string{"K3s-Node-Name": "a", "K3s-Node-Password": "pw"}); resp.StatusCode != 400 {
		t.Fatalf("k3s headers on an rke2 server: status %d, want 400", resp.StatusCode)
	}
	resp, body := get(t, srv, map[string]string{"Rke2-Node-Name": "RKE-Node", "Rke2-Node-Password": "pw", "Rke2-Node-Ip": "10.0.0.1"})
	if resp.StatusCode != 200 || gotNode != "rke-node" || body != "rke-node 10.0.0.1" {
		t.Fatalf("status %d, node %q, body %q", resp.StatusCode, gotNode, body)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	v := verifierFunc(func(context.Context, string, string) error { return nil })
	if _, err := httpauth.New(nil, nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	for _, p := range []string{"K3s", "k3s-x", "k 3"} {
		if _, err := httpauth.New(v, &httpauth.Options{Program: p}); err == nil {
			t.Errorf("Program %q accepted", p)
		}
	}
}

func TestHandlerFunc(t *testing.T) {
	a, err := httpauth.New(verifierFunc(func(context.Context, string, string) error { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(a.HandlerFunc(func(w http.ResponseWriter, _ *http.Request, n httpauth.Node) {
		io.WriteString(w, n.Name)
	}))
	defer srv.Close()
	if resp, body := get(t, srv, map[string]string{"K3s-Node-Name": "N1", "K3s-Node-Password": "pw"}); resp.StatusCode != 200 || body != "n1" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
}

// TestWithVerifier runs the real Verifier behind the middleware over TLS:
// first join enrolls, a retry is a cache hit, a wrong password is 403.
func TestWithVerifier(t *testing.T) {
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	srv := newServer(t, v, nil)
	hdr := map[string]string{"K3s-Node-Name": "worker-1", "K3s-Node-Password": "0123456789abcdef0123456789abcdef"}
	for i := range 3 {
		if resp, body := get(t, srv, hdr); resp.StatusCode != 200 || body != "worker-1 " {
			t.Fatalf("join %d: status %d body %q", i, resp.StatusCode, body)
		}
	}
	hdr["K3s-Node-Password"] = "wrong"
	if resp, _ := get(t, srv, hdr); resp.StatusCode != 403 {
		t.Fatalf("wrong password: status %d, want 403", resp.StatusCode)
	}
	// The wrong password costs no scrypt: the node's password is known.
	if s := v.Stats(); s.Enrollments != 1 || s.ScryptRuns != 1 || s.CacheHits != 3 || s.KnownMatchRejects != 1 {
		t.Fatalf("stats %+v: want 1 enrollment, 1 scrypt run, 3 cache hits", s)
	}
}

// TestCloseAnswers503: requests that a closing Verifier cuts short, and
// those after it, get 503 with a Retry-After over a real listener, not
// 500, so that agents go to another server.
func TestCloseAnswers503(t *testing.T) {
	var logs bytes.Buffer
	store := &gatedStore{MemoryStore: verify.NewMemoryStore(), entered: make(chan struct{})}
	v, err := verify.New(store, &verify.Options{Params: verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, v, &httpauth.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	hdr := map[string]string{"K3s-Node-Name": "worker-1", "K3s-Node-Password": "0123456789abcdef0123456789abcdef"}
	cut := make(chan *http.Response, 1)
	go func() {
		resp, _ := get(t, srv, hdr) // an enrollment whose Store.Create hangs
		cut <- resp
	}()
	<-store.entered
	v.Close()
	for _, resp := range []*http.Response{<-cut, func() *http.Response { r, _ := get(t, srv, hdr); return r }()} {
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("status %d, Retry-After %q; want 503 with a Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if strings.Contains(logs.String(), "check failed") {
		t.Fatalf("a shutdown was logged as a failure: %q", logs.String())
	}
}

// gatedStore's Create blocks until its context ends.
type gatedStore struct {
	*verify.MemoryStore
	entered chan struct{}
}

func (s *gatedStore) Create(ctx context.Context, node, hash string) error {
	close(s.entered)
	<-ctx.Done()
	return ctx.Err()
}
