package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"math/big"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// Path is the route the agents ask for, one of those k3s guards with the
// node password.
const Path = "/v1-k3s/serving-kubelet.crt"

// outcome is what an agent learned from one attempt.
type outcome struct {
	status     int           // HTTP status; 0 when no answer came
	retryAfter time.Duration // from Retry-After; 0 if none
	timeout    bool          // the client gave up (its timeout ended)
	connErr    bool          // the server could not be reached
}

// target carries agents' requests to the servers.
type target interface {
	// attempt sends a request for node n to server within ctx, which
	// carries the client timeout, from client: each agent (honest node,
	// duplicate or attacker) has its own client.
	attempt(ctx context.Context, client, server int, n Node) outcome
	// close stops the target after the agents have stopped and the models
	// have been closed.
	close()
}

// inprocTarget calls the models directly, as the HTTP handler would.
type inprocTarget struct {
	servers []model
	second  time.Duration // one Retry-After second, scaled
	drain   bool          // close waits for the handlers still running
	wg      sync.WaitGroup
}

func (t *inprocTarget) attempt(ctx context.Context, _, server int, n Node) outcome {
	m := t.servers[server]
	release, ok := m.admit()
	if !ok {
		return outcome{status: http.StatusTooManyRequests}
	}
	// The handler goes on when the client leaves, like a server's.
	done := make(chan error, 1)
	t.wg.Go(func() {
		defer release()
		done <- m.Ensure(ctx, n.Name, n.Password)
	})
	select {
	case err := <-done:
		return t.answer(err)
	case <-ctx.Done():
		return outcome{timeout: true}
	}
}

// answer maps Ensure's error to the response httpauth would send.
func (t *inprocTarget) answer(err error) outcome {
	var retry interface{ RetryAfter() time.Duration }
	switch {
	case err == nil:
		return outcome{status: http.StatusOK}
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

// httpTarget runs one HTTPS server per model and one client per agent.
type httpTarget struct {
	urls    []string
	servers []*http.Server
	clients []*http.Client
	nonH2   atomic.Uint64 // responses not over HTTP/2; should stay 0
}

// newHTTPTarget starts one server per model and makes clients clients.
func newHTTPTarget(models []model, clients int) (_ *httpTarget, err error) {
	serverTLS, pool, err := selfSignedTLS()
	if err != nil {
		return nil, err
	}
	t := &httpTarget{}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	quiet := slog.New(slog.DiscardHandler) // failures show as 500s to the agents
	for _, m := range models {
		auth, err := httpauth.New(m, &httpauth.Options{Logger: quiet})
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET "+Path, capped(m, auth.HandlerFunc(func(w http.ResponseWriter, _ *http.Request, node httpauth.Node) {
			io.WriteString(w, "certificate for "+node.Name+"\n")
		})))
		srv, url, err := serveTLS(mux, serverTLS)
		if err != nil {
			return nil, err
		}
		t.servers = append(t.servers, srv)
		t.urls = append(t.urls, url)
	}
	for range clients {
		t.clients = append(t.clients, agentClient(pool))
	}
	return t, nil
}

// serveTLS serves h over HTTPS (HTTP/2 first) with cfg on a new loopback
// port, as a k3s server does, and returns the server and the URL of Path
// on it.
func serveTLS(h http.Handler, cfg *tls.Config) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("bench: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         cfg.Clone(),
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // clients leaving mid-handshake
		ConnContext:       httpauth.ConnContext,
	}
	go srv.ServeTLS(ln, "", "")
	return srv, "https://" + ln.Addr().String() + Path, nil
}

// agentClient is one agent's HTTPS client, trusting pool: its own
// Transport, so its own connection, as a real node has.
func agentClient(pool *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}}
}

// capped wraps next in m's in-flight cap, answering 429 past it.
func capped(m model, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, ok := m.admit()
		if !ok {
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// agentRequest is node n's request to url, as a k3s agent sends it.
func agentRequest(ctx context.Context, url string, n Node) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("K3s-Node-Name", n.Name)
	req.Header.Set("K3s-Node-Password", n.Password)
	req.Header.Set("K3s-Node-Ip", "127.0.0.1")
	return req, nil
}

func (t *httpTarget) attempt(ctx context.Context, client, server int, n Node) outcome {
	req, err := agentRequest(ctx, t.urls[server], n)
	if err != nil {
		return outcome{connErr: true}
	}
	resp, err := t.clients[client].Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return outcome{timeout: true}
		}
		return outcome{connErr: true}
	}
	if resp.ProtoMajor != 2 {
		t.nonH2.Add(1)
	}
	o := outcome{status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		o.retryAfter = time.Duration(s) * time.Second
	}
	return o
}

func (t *httpTarget) close() {
	for _, c := range t.clients {
		c.CloseIdleConnections()
	}
	for _, s := range t.servers {
		s.Close()
	}
}

// EstimateTransport estimates the CPU time the herd's HTTPS takes beyond
// scrypt in sc's http mode, as wall time on GOMAXPROCS workers:
// sc.BoundSample requests (after a warm-up of one per worker), each from a
// new client over a new connection (TLS handshake on both sides, HTTP/2
// set-up, one GET) to an HTTPS server on loopback whose handler only
// answers, scaled to the herd's nodes. Every node needs at least one such
// request, and the agents here share the servers' CPUs, so in http mode
// it adds to the lower bound (Result.LocalTransport). It is 0 in inproc
// mode or when sc.BoundSample is 0.
func (h *Herd) EstimateTransport(ctx context.Context, sc Scenario) (time.Duration, error) {
	if sc.Mode != ModeHTTP || sc.BoundSample <= 0 {
		return 0, nil
	}
	sample := min(sc.BoundSample, len(h.Nodes))
	serverTLS, pool, err := selfSignedTLS()
	if err != nil {
		return 0, err
	}
	srv, url, err := serveTLS(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	}), serverTLS)
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	one := func(i int) error {
		c := agentClient(pool)
		defer c.CloseIdleConnections()
		req, err := agentRequest(ctx, url, h.Nodes[i])
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			return fmt.Errorf("answered %s over %s, want 200 over HTTP/2", resp.Status, resp.Proto)
		}
		return nil
	}
	workers := runtime.GOMAXPROCS(0)
	if err := parallel(ctx, min(workers, len(h.Nodes)), workers, one); err != nil {
		return 0, fmt.Errorf("bench: transport bound warm-up: %w", err)
	}
	start := time.Now()
	if err := parallel(ctx, sample, workers, one); err != nil {
		return 0, fmt.Errorf("bench: transport bound: %w", err)
	}
	return time.Since(start) * time.Duration(len(h.Nodes)) / time.Duration(sample), nil
}

// selfSignedTLS makes a CA and a certificate for 127.0.0.1 signed by it,
// and returns the server's TLS config (HTTP/2 first) and a pool holding
// the CA.
func selfSignedTLS() (*tls.Config, *x509.CertPool, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nodepass bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("bench: server certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	cfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
	return cfg, pool, nil
}
