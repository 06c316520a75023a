package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// TestAnnouncedPorts: /v1-<prog>/apiservers lists API server endpoints
// and /v1-<prog>/config says which port is the supervisor's and which the
// API server's (HTTPSPort), as k3s and RKE2 do (k3s
// pkg/server/handlers/handlers.go APIServers and Config; rancher/rke2
// pkg/cli/defaults/defaults.go: SupervisorPort 9345, HTTPSPort 6443). On
// k3s the two are one port; on RKE2 the API servers are on 6443 and the
// supervisor on its own port, so an agent must not use the listed
// addresses as supervisors as they are (k3s pkg/agent/proxy/apiproxy.go
// setSupervisorPort replaces their port).
func TestAnnouncedPorts(t *testing.T) {
	for _, c := range []struct {
		program string
		flags   []string
		api     string // the API server port; "" for the supervisor's
		servers string // /apiservers, with "" for the supervisor's port
	}{
		{"k3s", nil, "", "127.0.0.1:"},
		{"rke2", nil, "6443", "127.0.0.1:6443"},
		{"k3s", []string{"-apiserver-port", "6443"}, "6443", "127.0.0.1:6443"},
		{"rke2", []string{"-apiservers", "10.0.0.1:6443,10.0.0.2:6443", "-store", "dir"}, "6443", "10.0.0.1:6443,10.0.0.2:6443"},
	} {
		s := startWithToken(t, "join-secret\n", "join-secret", append([]string{"-program", c.program}, c.flags...)...)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "https://"))
		api, servers := c.api, c.servers
		if api == "" {
			api = port
		}
		if strings.HasSuffix(servers, ":") {
			servers += port
		}
		_, body := s.get(t, "/v1-"+c.program+"/config", "", "", "")
		var cfg struct{ SupervisorPort, HTTPSPort int }
		if err := json.Unmarshal(body, &cfg); err != nil || strconv.Itoa(cfg.SupervisorPort) != port || strconv.Itoa(cfg.HTTPSPort) != api {
			t.Errorf("%s %q: /config %s (%v), want SupervisorPort %s, HTTPSPort %s", c.program, c.flags, body, err, port, api)
		}
		_, body = s.get(t, "/v1-"+c.program+"/apiservers", "", "", "")
		var got []string
		if err := json.Unmarshal(body, &got); err != nil || strings.Join(got, ",") != servers {
			t.Errorf("%s %q: /apiservers %s (%v), want %s", c.program, c.flags, body, err, servers)
		}
	}
}

// TestNoDatastore: with -no-datastore, /apiservers answers [] after 5 s,
// as k3s does when no datastore answers (k3s
// pkg/server/handlers/handlers.go APIServers: getAddressCollector waits
// out the request's 5 s context), and nothing to a client that left; the
// other routes answer at once. The routes are those of the flags.
func TestNoDatastore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		if err := v.LoadTokens(t.Context(), strings.NewReader("join-secret,node,node\n")); err != nil {
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		auth, err := httpauth.New(v, &httpauth.Options{Tokens: v, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		cas, err := newAuthorities("", caOptions{now: time.Now, notBefore: notBeforeRecent})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := parseFlags([]string{"-no-datastore", "-token-file", "set"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		mux := routes(cfg, cas, leaf{}, announced{supervisorPort: 9345, apiserverPort: 9345, apiservers: []string{"10.0.0.1:9345"}}, auth, newAudit(log), log)

		ask := func(ctx context.Context, path string) *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
			req.SetBasicAuth("node", "join-secret")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			return rec
		}
		start := time.Now()
		if rec := ask(t.Context(), "/v1-k3s/config"); rec.Code != http.StatusOK || time.Since(start) != 0 {
			t.Errorf("/config: %d after %v", rec.Code, time.Since(start))
		}
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- ask(t.Context(), "/v1-k3s/apiservers") }()
		time.Sleep(noDatastoreWait - time.Nanosecond)
		synctest.Wait()
		select {
		case <-done:
			t.Fatalf("answered after %v", time.Since(start))
		default:
		}
		time.Sleep(time.Nanosecond)
		rec := <-done
		if rec.Code != http.StatusOK || rec.Body.String() != "[]" || rec.Header().Get("Content-Type") != "application/json" || time.Since(start) != 5*time.Second {
			t.Errorf("/apiservers: %d %q %q after %v, want 200 [] after 5s", rec.Code, rec.Body, rec.Header().Get("Content-Type"), time.Since(start))
		}

		// A client that leaves after a second: no answer, the handler
		// returns then.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		if rec := ask(ctx, "/v1-k3s/apiservers"); rec.Body.Len() != 0 || time.Since(start) != time.Second {
			t.Errorf("a client that left after 1s: %q after %v", rec.Body, time.Since(start))
		}
	})
}
