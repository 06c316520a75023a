package httpauth_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// tick is how far the kernel's clock (TCP_INFO, Linux) may put a
// connection's arrival before the event itself: one clock tick, at most
// 10 ms.
const tick = 10 * time.Millisecond

// dated is the arrival a handler saw on a request.
type dated struct {
	route string
	at    time.Time
	ok    bool
}

// arrivalServer starts an HTTPS server (HTTP/2 with h2) whose mux has a
// checked route, /v1-k3s/serving-kubelet.crt over v, and an unchecked
// one, /ping; both report the arrival their request carries on the
// returned channel (the checked one through v). wrap is applied to the
// mux; connContext sets ConnContext. came lists the client address of
// every request in order: the connection it came on, as the server saw
// it. (Counting accepted connections would not do: Go's HTTP/2 client may
// dial one more than it uses, golang/go#59155.)
func arrivalServer(t *testing.T, v httpauth.Verifier, h2, connContext bool, wrap func(http.Handler) http.Handler, log *slog.Logger) (srv *httptest.Server, pings <-chan dated, came func() []string) {
	t.Helper()
	a, err := httpauth.New(v, &httpauth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan dated, 8)
	mux := http.NewServeMux()
	mux.Handle("/v1-k3s/serving-kubelet.crt", a.HandlerFunc(func(http.ResponseWriter, *http.Request, httpauth.Node) {}))
	mux.HandleFunc("/ping", func(_ http.ResponseWriter, r *http.Request) {
		at, ok := verify.Arrival(r.Context())
		ch <- dated{"ping", at, ok}
	})
	var mu sync.Mutex
	var addrs []string
	inner := wrap(mux)
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		addrs = append(addrs, r.RemoteAddr)
		mu.Unlock()
		inner.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = h2
	if connContext {
		srv.Config.ConnContext = httpauth.ConnContext
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ch, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(addrs)
	}
}

// exchange is one request as the client saw it.
type exchange struct {
	sent      time.Time // just before the request was sent
	handshook time.Time // when its connection's TLS handshake ended; zero on a reused connection
	reused    bool
	proto     string
	status    int
}

// send sends a request for path, with a node's headers when checked.
// handshook is the last TLS handshake that ended before the request got
// its connection: a dial the client started for it but did not use
// (golang/go#59155) may end later, and is not the request's.
func send(t *testing.T, srv *httptest.Server, path string, checked bool) exchange {
	t.Helper()
	var (
		mu        sync.Mutex
		x         exchange
		handshook time.Time
	)
	trace := &httptrace.ClientTrace{
		TLSHandshakeDone: func(tls.ConnectionState, error) {
			mu.Lock()
			handshook = time.Now()
			mu.Unlock()
		},
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			x.reused, x.handshook = info.Reused, time.Time{}
			if !info.Reused {
				x.handshook = handshook
			}
			mu.Unlock()
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if checked {
		req.Header.Set("K3s-Node-Name", "worker-1")
		req.Header.Set("K3s-Node-Password", "0123456789abcdef0123456789abcdef")
	}
	sent := time.Now()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	mu.Lock()
	defer mu.Unlock()
	x.sent, x.proto, x.status = sent, resp.Proto, resp.StatusCode
	return x
}

// reportArrival is a Verifier that reports the arrival its ctx carries.
func reportArrival(ch chan<- dated) httpauth.Verifier {
	return verifierFunc(func(ctx context.Context, _, _ string) error {
		at, ok := verify.Arrival(ctx)
		ch <- dated{"checked", at, ok}
		return nil
	})
}

// TestArrivalHandler: with ConnContext and ArrivalHandler, over HTTPS
// with HTTP/1.1 keep-alive and with HTTP/2, the first request on a
// connection, whatever its route, is dated from when the connection came
// (before its TLS handshake ended), and a checked request after an
// unchecked one on the same connection from when it was sent or later,
// never from the connection.
func TestArrivalHandler(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "http1", true: "h2"}[h2], func(t *testing.T) {
			checks := make(chan dated, 8)
			srv, pings, came := arrivalServer(t, reportArrival(checks), h2, true, httpauth.ArrivalHandler, nil)
			wantProto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2]

			// The first request on a connection, unchecked, then a checked one.
			ping := send(t, srv, "/ping", false)
			check := send(t, srv, "/v1-k3s/serving-kubelet.crt", true)
			first, second := <-pings, <-checks
			if ping.reused || !check.reused || ping.handshook.IsZero() || ping.proto != wantProto || check.status != 200 {
				t.Fatalf("ping %+v, checked request %+v: want %s, a new connection, then the same one and 200", ping, check, wantProto)
			}
			if !first.ok || first.at.After(ping.handshook) || first.at.Before(ping.sent.Add(-tick)) {
				t.Errorf("the first request (unchecked) is dated %v after it was sent (set %v); want from when its connection came, before its handshake ended (%v after)",
					first.at.Sub(ping.sent), first.ok, ping.handshook.Sub(ping.sent))
			}
			if !second.ok || second.at.Before(check.sent) {
				t.Errorf("the checked request after it on the same connection is dated %v before it was sent (set %v); want from when it came, never from the connection",
					check.sent.Sub(second.at), second.ok)
			}

			// A checked request first on a new connection is dated from the connection.
			srv.Client().CloseIdleConnections()
			check = send(t, srv, "/v1-k3s/serving-kubelet.crt", true)
			got := <-checks
			if check.reused || check.handshook.IsZero() || check.status != 200 {
				t.Fatalf("checked request %+v: want a new connection and 200", check)
			}
			if !got.ok || got.at.After(check.handshook) || got.at.Before(check.sent.Add(-tick)) {
				t.Errorf("the first request (checked) is dated %v after it was sent (set %v); want from when its connection came, before its handshake ended (%v after)",
					got.at.Sub(check.sent), got.ok, check.handshook.Sub(check.sent))
			}
			if c := came(); len(c) != 3 || c[0] != c[1] || c[1] == c[2] {
				t.Errorf("requests came from %q; want the first two on one connection, the third on another", c)
			}
		})
	}
}

// TestArrivalHandlerAlone: ArrivalHandler without ConnContext dates every
// request from when it reaches the handler; ConnContext without
// ArrivalHandler dates none, and the Auth warns once.
func TestArrivalHandlerAlone(t *testing.T) {
	checks := make(chan dated, 8)
	srv, _, _ := arrivalServer(t, reportArrival(checks), false, false, httpauth.ArrivalHandler, nil)
	for range 2 {
		x := send(t, srv, "/v1-k3s/serving-kubelet.crt", true)
		if got := <-checks; !got.ok || got.at.Before(x.sent) {
			t.Errorf("ArrivalHandler without ConnContext: dated %v before the request was sent (set %v); want from the handler", x.sent.Sub(got.at), got.ok)
		}
	}

	var logs bytes.Buffer
	srv, _, _ = arrivalServer(t, reportArrival(checks), false, true, func(h http.Handler) http.Handler { return h },
		slog.New(slog.NewTextHandler(&logs, nil)))
	for range 2 {
		send(t, srv, "/v1-k3s/serving-kubelet.crt", true)
		if got := <-checks; got.ok {
			t.Errorf("ConnContext without ArrivalHandler: a request dated %v", got.at)
		}
	}
	if n := strings.Count(logs.String(), "not wrapped in ArrivalHandler"); n != 1 {
		t.Errorf("%d warnings of ConnContext without ArrivalHandler, want 1: %q", n, logs.String())
	}
}

// TestKeptAliveConnectionNotShed is the defect the first-request rule
// fixes, against the real Verifier: on an idle server, a checked request
// that comes on a kept-alive connection longer than MaxWait after the
// connection did, behind a request to another route, is served, not
// answered 503 at once as if it had waited since the connection came.
func TestKeptAliveConnectionNotShed(t *testing.T) {
	const maxWait = 500 * time.Millisecond
	for _, h2 := range []bool{false, true} {
		v, err := verify.New(verify.NewMemoryStore(), &verify.Options{
			Params: verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}, MaxWait: maxWait})
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		srv, _, came := arrivalServer(t, v, h2, true, httpauth.ArrivalHandler, nil)
		send(t, srv, "/ping", false)
		time.Sleep(2 * maxWait) // the connection stays open, idle
		if x := send(t, srv, "/v1-k3s/serving-kubelet.crt", true); x.status != 200 || !x.reused || len(came()) != 2 || came()[0] != came()[1] {
			t.Errorf("h2 %v: the checked request on the kept-alive connection: status %d, reused %v, requests came from %q; want 200 on the same connection",
				h2, x.status, x.reused, came())
		}
	}
}
