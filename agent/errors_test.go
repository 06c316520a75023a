package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Every error says who refused and why, with "agent:" once: the agent
// refusing a server's CA is not the server refusing the token; a 400
// says which of the node name and password the server refused when its
// answer tells (k3s answers a Kubernetes Status: pkg/util/apierrors.go
// SendError, with the messages of pkg/nodepassword/validate.go); a 404
// is ErrNoRoute; the timeout's message does not repeat the prefix.
func TestErrorsSayAgentOnce(t *testing.T) {
	status := func(msg string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + msg + `","reason":"BadRequest","code":400}`))
			return true
		}
	}
	text := func(msg string) func(w http.ResponseWriter, r *http.Request) bool { // a 400 as net/http writes one
		return func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodPost {
				return false
			}
			http.Error(w, msg, http.StatusBadRequest)
			return true
		}
	}
	for _, tc := range []struct {
		name     string
		setup    func(*cluster, *supervisor, *Options)
		retried  bool // not a rejection: Get is ended after the first attempt
		is       error
		says     []string
		saysNot  []string
		attempts uint64
	}{
		{name: "CA hash", setup: func(_ *cluster, _ *supervisor, o *Options) {
			o.Token = "K10" + strings.Repeat("0", 64) + "::server:s3cret"
		}, is: ErrCARejected, says: []string{"the server's CA is not the one the token pins", "the token's is 0000"}, saysNot: []string{"rejected the join token"}},
		{name: "no server", setup: func(_ *cluster, s *supervisor, o *Options) {
			s.srv.Close()
			o.DataDir = o.DataDir + "-fresh" // no certificates on disk to go on with
		}, retried: true, is: context.Canceled, says: []string{"agent: giving up (context canceled); the last attempt: GET /cacerts: no server answered: "}},
		{name: "k3s: node password not set", setup: func(_ *cluster, s *supervisor, _ *Options) { s.override = status("node password not set") },
			is: ErrRefused, says: []string{"400 Bad Request", ": node password not set (the server refused the node password from "}},
		{name: "k3s: node name not set", setup: func(_ *cluster, s *supervisor, _ *Options) { s.override = status("node name not set") },
			is: ErrRefused, says: []string{`node name not set (the server refused the node name "worker-1")`}},
		{name: "httpauth: invalid node name or password", setup: func(_ *cluster, s *supervisor, _ *Options) {
			s.override = text("invalid node name or password")
		}, is: ErrRefused, says: []string{`invalid node name or password (the node name "worker-1" or the password from `, "the answer does not say which"}},
		{name: "examples/server: an address refused", setup: func(_ *cluster, s *supervisor, _ *Options) {
			s.override = text("K3s-Node-Ip: 127.0.0.1 is not a node's address")
		}, is: ErrRefused, says: []string{"to POST /v1-k3s/serving-kubelet.crt: K3s-Node-Ip: 127.0.0.1 is not a node's address"}, saysNot: []string{"("}},
		{name: "404", setup: func(_ *cluster, _ *supervisor, o *Options) { o.Program = "rke2" },
			is: ErrNoRoute, says: []string{"404 Not Found to GET /v1-rke2/config"}},
		{name: "unusable certificate", setup: func(cl *cluster, s *supervisor, _ *Options) {
			// A certificate for a key the agent does not hold.
			key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			s.override = func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodPost {
					return false
				}
				w.Write(cl.kubelet().issue(t, leaf{cn: "worker-1", dns: "worker-1", usage: x509.ExtKeyUsageServerAuth}, key.Public()))
				return true
			}
		}, retried: true, says: []string{"sent an unusable certificate: ", "the certificate is not for the key in "}},
		{name: "no address", setup: func(_ *cluster, _ *supervisor, o *Options) { o.NodeIP = "" },
			retried: true, is: errNoAddress, says: []string{"; the last attempt: the node has no address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t)
			s := newSupervisor(t, cl)
			logs := &logBuffer{watch: "waiting to retrieve the certificates", seen: make(chan string, 100)}
			opts := testOptions(cl, s.addr, t.TempDir(), logs)
			opts.StopOnRejection = true
			tc.setup(cl, s, opts)
			c := newClient(t, opts)
			if tc.name == "no address" {
				c.routeIPs = func() []net.IP { return nil }
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.retried {
				go func() { // after the first attempt
					select {
					case <-logs.seen:
						cancel()
					case <-ctx.Done():
					}
				}()
			}
			_, err := c.Get(ctx)
			if err == nil {
				t.Fatal("Get succeeded")
			}
			msg := err.Error()
			if n := strings.Count(msg, "agent:"); n != 1 || !strings.HasPrefix(msg, "agent: ") {
				t.Errorf("%q says agent: %d times, want once, first", msg, n)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%q is not %v", msg, tc.is)
			}
			for _, want := range tc.says {
				if !strings.Contains(msg, want) {
					t.Errorf("%q does not say %q", msg, want)
				}
			}
			for _, not := range tc.saysNot {
				if strings.Contains(msg, not) {
					t.Errorf("%q says %q", msg, not)
				}
			}
		})
	}
}

// A server that cannot be reached logs its failure once, and the wait
// that follows once, however many attempts fail the same way: the rest
// go to the debug level. With one server, nothing says "moving on to the
// next server". (k3s's agent logs every attempt at INFO:
// pkg/agent/config/config.go Get.)
func TestUnreachableServerLogsOnce(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	s.srv.Close()
	logs := &logBuffer{watch: "waiting to retrieve the certificates", seen: make(chan string, 100)}
	opts := testOptions(cl, s.addr, t.TempDir(), logs)
	c := newClient(t, opts)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := c.Get(ctx)
		done <- err
	}()
	for range 5 {
		<-logs.seen
	}
	cancel()
	<-done
	info := 0
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=INFO") {
			info++
		}
	}
	if n := c.Stats().Attempts; info != 2 || n < 5 {
		t.Errorf("%d attempts logged %d lines at INFO, want 2:\n%s", n, info, logs.String())
	}
	if strings.Contains(logs.String(), "moving on") {
		t.Errorf("one server, and the log says moving on:\n%s", logs.String())
	}
}

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}

// An agent whose server cannot be reached, with the default backoff, for
// the 5 minutes of examples/agent's -timeout: at INFO, besides its first
// lines, one line a minute says it still tries, with the attempts so far
// and the last error, so that an operator sees it is not stuck. (k3s's
// agent logs every attempt at INFO: pkg/agent/config/config.go Get.)
// Fake time.
func TestUnreachableServerSaysSoEveryMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there
		var logs records
		c, err := New(&Options{Server: "https://" + addr, Token: "K10::server:s3cret", NodeName: "worker-1", NodeIP: "192.0.2.10",
			DataDir: t.TempDir(), NodePassword: "p", Logger: slog.New(&logs)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		if _, err := c.Get(ctx); err == nil {
			t.Fatal("Get succeeded")
		}
		logs.mu.Lock()
		defer logs.mu.Unlock()
		var still []slog.Record
		info := []time.Time{start}
		for _, r := range logs.recs {
			if r.Level < slog.LevelInfo {
				continue
			}
			info = append(info, r.Time)
			if r.Message == "agent: still waiting to retrieve the certificates" {
				still = append(still, r)
			}
		}
		info = append(info, time.Now())
		for i := 1; i < len(info); i++ {
			if gap := info[i].Sub(info[i-1]); gap > time.Minute+DefaultBackoffCap {
				t.Errorf("%v without a line at INFO, from %v on", gap, info[i-1].Sub(start))
			}
		}
		for i, r := range still {
			attrs := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
			if attrs["attempts"] == "" || !strings.Contains(attrs["err"], addr) {
				t.Errorf("line %d says %v: want the attempts and the last error", i, attrs)
			}
			if i > 0 && r.Time.Sub(still[i-1].Time) < time.Minute {
				t.Errorf("two lines within %v", r.Time.Sub(still[i-1].Time))
			}
		}
		if len(still) < 3 {
			t.Errorf("%d lines saying it still tries in 5 minutes, want one a minute", len(still))
		}
	})
}
