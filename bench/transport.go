package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// outcome is what an agent learned from one request.
type outcome struct {
	status     int           // HTTP status; 0 when no answer came
	retryAfter time.Duration // from Retry-After; 0 if none
	timeout    bool          // the client gave up (its timeout ended)
	connErr    bool          // the server could not be reached, or the TLS handshake failed
	handshakes int           // TLS handshakes the request started
	// took and guardedAt are set by attempt: how long the request that
	// ended the attempt took, and when the attempt's first
	// password-guarded request was sent (zero if none was).
	took      time.Duration
	guardedAt time.Time
}

// target carries agents' requests to the servers.
type target interface {
	steps() []step // an attempt's requests, in order
	// do sends request s of node n to server from client (each agent has
	// its own) within ctx, the client timeout, with the join token's
	// password token.
	do(ctx context.Context, client, server int, n Node, s step, token string) outcome
	close() // after the agents have stopped and the models closed
}

// inprocTarget calls the models as the HTTP handler would: the join
// token, the in-flight cap, then on the two guarded requests the node's
// password.
type inprocTarget struct {
	servers []model
	second  time.Duration // one Retry-After second, scaled
	drain   bool          // close waits for the handlers still running
	wg      sync.WaitGroup
}

func (t *inprocTarget) steps() []step { return inprocSteps }

func (t *inprocTarget) do(ctx context.Context, _, server int, n Node, s step, token string) outcome {
	if !s.authed() {
		return outcome{status: http.StatusOK}
	}
	m := t.servers[server]
	// The handler goes on when the client leaves, like a server's.
	done := make(chan outcome, 1)
	t.wg.Go(func() {
		if err := m.VerifyToken(ctx, tokenUser, token); err != nil {
			done <- t.answer(err, true)
			return
		}
		release, ok := m.admit(s.method() != http.MethodGet)
		if !ok {
			done <- outcome{status: http.StatusTooManyRequests, retryAfter: t.second}
			return
		}
		defer release()
		if !s.guarded() {
			done <- outcome{status: http.StatusOK}
			return
		}
		done <- t.answer(m.Ensure(ctx, n.Name, n.Password), false)
	})
	select {
	case o := <-done:
		return o
	case <-ctx.Done():
		return outcome{timeout: true}
	}
}

// answer maps Ensure's error, or with token VerifyToken's, to the
// response httpauth would send: a token refused is 401.
func (t *inprocTarget) answer(err error, token bool) outcome {
	var retry interface{ RetryAfter() time.Duration }
	switch {
	case err == nil:
		return outcome{status: http.StatusOK}
	case token && (errors.Is(err, verify.ErrMismatchedHashAndPassword) || errors.Is(err, verify.ErrInvalidInput) || errors.Is(err, verify.ErrInvalidHash)):
		return outcome{status: http.StatusUnauthorized}
	case errors.Is(err, verify.ErrMismatchedHashAndPassword):
		return outcome{status: http.StatusForbidden}
	case errors.Is(err, verify.ErrInvalidInput):
		return outcome{status: http.StatusBadRequest}
	case errors.Is(err, verify.ErrNotFound):
		return outcome{status: http.StatusUnauthorized}
	case errors.As(err, &retry):
		// Whole seconds, rounded up, as the Retry-After header carries.
		secs := math.Max(1, math.Ceil(float64(retry.RetryAfter())/float64(t.second)))
		return outcome{status: http.StatusServiceUnavailable, retryAfter: time.Duration(secs) * t.second}
	case errors.Is(err, verify.ErrOverloaded), errors.Is(err, verify.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcome{status: http.StatusServiceUnavailable}
	}
	return outcome{status: http.StatusInternalServerError}
}

func (t *inprocTarget) close() {
	if t.drain {
		t.wg.Wait()
	}
}

// httpServers runs one HTTPS server per model on 127.0.0.1 (see mux).
type httpServers struct {
	ca      *benchCA
	urls    []string // https://127.0.0.1:PORT, by server
	servers []*http.Server
	conns   atomic.Uint64 // connections accepted, every server
}

// configBody is what GET /v1-k3s/config answers: 2 KB of JSON standing
// for the configuration a k3s server sends its agents.
var configBody = []byte(`{"settings":[` + strings.TrimSuffix(strings.Repeat(`{"setting":"value"},`, 100), ",") + `]}`)

// maxCSRSize bounds the body of a certificate request.
const maxCSRSize = 64 << 10

// newHTTPServers starts a server for each model, with sc's CA (CAAge,
// CANotBefore); the first hung of them hang (see hangHandler).
func newHTTPServers(models []model, hung int, sc Scenario) (_ *httpServers, err error) {
	ca, err := newBenchCA(sc.CAAge, sc.CANotBefore)
	if err != nil {
		return nil, err
	}
	s := &httpServers{ca: ca}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	for i, m := range models {
		h := http.Handler(hangHandler{})
		if i >= hung {
			if h, err = s.mux(m); err != nil {
				return nil, err
			}
		}
		if err := s.serve(h); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// mux serves m as a k3s supervisor serves its agents
// (pkg/server/handlers/router.go): GET /cacerts without authentication;
// every other route behind the join token's check (httpauth's, with m's
// VerifyToken), then m's in-flight cap: the configuration, both CA files,
// the servers, the two kubelet certificates (POST with a CSR, or GET for
// older agents) behind the node's password, and the kube-proxy's and the
// controller's certificates (POST with a CSR).
func (s *httpServers) mux(m model) (http.Handler, error) {
	auth, err := httpauth.New(m, &httpauth.Options{Logger: slog.New(slog.DiscardHandler), Tokens: m})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	// answer writes what body returns for a request and its body (at most
	// maxCSRSize bytes), or 400.
	answer := func(body func(r *http.Request, b []byte) ([]byte, error)) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCSRSize))
			if err == nil {
				b, err = body(r, b)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Write(b)
		})
	}
	fixed := func(b []byte) http.Handler {
		return answer(func(*http.Request, []byte) ([]byte, error) { return b, nil })
	}
	kubelet := func(client bool) http.Handler {
		return auth.Middleware(answer(func(r *http.Request, b []byte) ([]byte, error) {
			node, _ := httpauth.NodeFromContext(r.Context())
			return s.ca.kubeletCert(node.Name, client, r.Method == http.MethodPost, b)
		}))
	}
	component := func(st step) http.Handler {
		return answer(func(_ *http.Request, b []byte) ([]byte, error) { return s.ca.componentCert(st, b) })
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+stepCACerts.path(), fixed(s.ca.pem))
	mux.Handle("GET /ping", fixed([]byte("pong"))) // the load balancer's probe
	for pattern, h := range map[string]http.Handler{
		"GET " + stepConfig.path(): fixed(configBody), "GET " + stepClientCA.path(): fixed(s.ca.pem), "GET " + stepServerCA.path(): fixed(s.ca.pem),
		// Every server of the run, read when asked: the list is complete
		// by the time the agents start.
		"GET /v1-k3s/apiservers":        answer(func(*http.Request, []byte) ([]byte, error) { return json.Marshal(hosts(s.urls)) }),
		"GET " + stepServingCert.path(): kubelet(false), "POST " + stepServingCert.path(): kubelet(false),
		"GET " + stepClientCert.path(): kubelet(true), "POST " + stepClientCert.path(): kubelet(true),
		"POST " + stepProxyCert.path(): component(stepProxyCert), "POST " + stepControllerCert.path(): component(stepControllerCert),
	} {
		mux.Handle(pattern, auth.TokenHandler(capped(m, strings.HasPrefix(pattern, "POST"), h)))
	}
	return mux, nil
}

// hangHandler is a server that accepts connections, completes the TLS
// handshake and reads requests, then never answers, as the incident's
// server did with its CPUs pinned.
type hangHandler struct{}

func (hangHandler) ServeHTTP(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// hosts returns the host:port of each https://host:port in urls.
func hosts(urls []string) []string {
	h := make([]string, len(urls))
	for i, u := range urls {
		h[i] = strings.TrimPrefix(u, "https://")
	}
	return h
}

// serve serves h over HTTPS on a new loopback port and adds it to s.
func (s *httpServers) serve(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	srv := &http.Server{
		Handler:           httpauth.ArrivalHandler(h),
		TLSConfig:         s.ca.tls.Clone(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // clients leaving mid-handshake, probes refusing the certificate
		ConnContext:       httpauth.ConnContext,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
	}
	go srv.ServeTLS(ln, "", "")
	s.servers = append(s.servers, srv)
	s.urls = append(s.urls, "https://"+ln.Addr().String())
	return nil
}

func (s *httpServers) endpoint() Endpoint {
	return Endpoint{URLs: s.urls, CA: s.ca.pem, CAKey: s.ca.keyPEM()}
}

func (s *httpServers) close() {
	for _, srv := range s.servers {
		srv.Close()
	}
}

// capped wraps next in m's in-flight cap, answering 429 with Retry-After:
// 1 past it, as k3s's max-in-flight filter does.
func capped(m model, mutating bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, ok := m.admit(mutating)
		if !ok {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many requests, please try again later", http.StatusTooManyRequests)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// httpAgents carries the agents' requests over HTTPS as k3s agents send
// them, with keep-alives disabled: the probe of /cacerts trusts no CA, the
// second /cacerts none at all, every later request the cluster's CA. Each
// agent has its own key and CSRs, made before the herd starts.
type httpAgents struct {
	urls                      []string
	probe, insecure, verified *http.Client
	// keys[client] is the client's key and CSRs; only the client's own
	// agent goroutine uses it.
	keys []*agentKey
}

// newHTTPAgents makes the clients of agents asking for names (one per
// client; "" for an attacker, which names a node per guess) against the
// servers at urls, whose CA is caPEM.
func newHTTPAgents(ctx context.Context, urls []string, caPEM []byte, names []string) (*httpAgents, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("bench: no CA certificate for the agents")
	}
	client := func(cfg *tls.Config) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}
	t := &httpAgents{
		urls:     urls,
		probe:    client(&tls.Config{RootCAs: x509.NewCertPool()}),
		insecure: client(&tls.Config{InsecureSkipVerify: true}),
		verified: client(&tls.Config{RootCAs: pool}),
		keys:     make([]*agentKey, len(names)),
	}
	err := parallel(ctx, len(names), runtime.GOMAXPROCS(0), func(i int) (err error) {
		t.keys[i], err = newAgentKey(names[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *httpAgents) steps() []step { return httpSteps }

func (t *httpAgents) do(ctx context.Context, client, server int, n Node, s step, token string) outcome {
	var o outcome
	var body []byte
	if s.method() == http.MethodPost {
		var err error
		if body, err = t.keys[client].request(n.Name, s); err != nil {
			return outcome{connErr: true}
		}
	}
	var handshakes atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{TLSHandshakeStart: func() { handshakes.Add(1) }})
	req, err := http.NewRequestWithContext(ctx, s.method(), t.urls[server]+s.path(), bytes.NewReader(body))
	if err != nil {
		return outcome{connErr: true}
	}
	if s.authed() {
		req.SetBasicAuth(tokenUser, token)
	}
	if s.guarded() {
		req.Header.Set("K3s-Node-Name", n.Name)
		req.Header.Set("K3s-Node-Password", n.Password)
		req.Header.Set("K3s-Node-Ip", "127.0.0.1")
	}
	c := t.verified
	switch s {
	case stepCACertsProbe:
		c = t.probe
	case stepCACertsInsecure:
		c = t.insecure
	}
	resp, err := c.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	o.handshakes = int(handshakes.Load())
	if err != nil { // the client timeout, or no connection
		o.timeout, o.connErr = ctx.Err() != nil, ctx.Err() == nil
		return o
	}
	o.status = resp.StatusCode
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		o.retryAfter = time.Duration(s) * time.Second
	}
	return o
}

func (t *httpAgents) close() {
	for _, c := range []*http.Client{t.probe, t.insecure, t.verified} {
		c.CloseIdleConnections()
	}
}

// openModel lets every node in: the transport bound's server.
type openModel struct{}

func (openModel) Ensure(context.Context, string, string) error      { return nil }
func (openModel) VerifyToken(context.Context, string, string) error { return nil }
func (openModel) admit(bool) (func(), bool)                         { return func() {}, true }
func (openModel) counts() modelCounts                               { return modelCounts{} }
func (openModel) keepsState() bool                                  { return false }
func (openModel) close(bool)                                        {}

// EstimateTransport estimates the time the herd's HTTPS takes on
// GOMAXPROCS workers: sc.BoundSample k3s agents' attempts (after a
// warm-up of one per worker) against a server that lets every node in
// without scrypt, scaled to the herd. Every node needs one such attempt,
// so when the agents share the servers' CPUs it adds to the lower bound
// (Result.LocalTransport). It is 0 in inproc mode or without a sample.
func (h *Herd) EstimateTransport(ctx context.Context, sc Scenario) (time.Duration, error) {
	if sc.Mode != ModeHTTP || sc.BoundSample <= 0 {
		return 0, nil
	}
	sc = sc.WithDefaults()
	workers := runtime.GOMAXPROCS(0)
	sample := min(sc.BoundSample, len(h.Nodes))
	warm := min(workers, len(h.Nodes))
	srv, err := newHTTPServers([]model{openModel{}}, 0, sc)
	if err != nil {
		return 0, err
	}
	defer srv.close()
	names := make([]string, max(sample, warm))
	for i := range names {
		names[i] = h.Nodes[i].Name
	}
	agents, err := newHTTPAgents(ctx, srv.urls, srv.ca.pem, names)
	if err != nil {
		return 0, err
	}
	defer agents.close()
	one := func(i int) error {
		o, _, _ := attempt(ctx, agents, DefaultClientTimeout, i, 0, h.Nodes[i], h.Token)
		if o.status != http.StatusOK {
			return fmt.Errorf("an attempt ended with %+v, want 200 for every request", o)
		}
		return nil
	}
	d, err := timeWarm("transport bound", func() error { return parallel(ctx, warm, workers, one) },
		func() error { return parallel(ctx, sample, workers, one) })
	return d * time.Duration(len(h.Nodes)) / time.Duration(sample), err
}
