package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepass/nodepass/agent/internal/local"
)

// A Client keeps one connection to each server it uses, HTTP/2 where the
// server offers it, for as long as the server keeps it: an attempt's
// requests to a server share one TLS handshake, and a new connection
// resumes the TLS session of the last one. The connections are
// http.ClientConns the Client owns (not a Transport's pool), so that it
// knows which connection was checked against which CA.
//
// Before the servers' CA is known (a first join), /cacerts is fetched
// over a connection whose certificate is not checked at the handshake;
// once the CA arrives, matches the token's hash, and the connection's
// certificate chains to it, that connection carries the attempt's other
// requests. Every other connection is checked at its handshake.

// serverConn is the Client's connection to one server; guarded by
// Client.mu.
type serverConn struct {
	cc       *http.ClientConn
	verified bool // its certificate chains to Client.trust
	identity bool // its handshake presented Client.identity
	answered bool // the server has answered a request on it
}

// transport returns a Transport that makes the Client's connections:
// checked against Client.trust, or not (bootstrap); presenting
// Client.identity, or not.
func (c *Client) transport(bootstrap, identity bool) *http.Transport {
	t := &http.Transport{
		ForceAttemptHTTP2: true,
		DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return c.dialTLS(ctx, addr, bootstrap, identity)
		},
	}
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP1(true)
	t.Protocols.SetHTTP2(true)
	return t
}

// dialTLS connects to addr and completes a TLS handshake, counting it.
func (c *Client) dialTLS(ctx context.Context, addr string, bootstrap, identity bool) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	raw, err := c.opts.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		ServerName:         host,
		NextProtos:         []string{"h2", "http/1.1"},
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: c.tlsSessions(addr, identity),
		// The Client checks the chain itself, against a CA that changes
		// at run time, resumed sessions included.
		InsecureSkipVerify: true,
	}
	if !bootstrap {
		cfg.VerifyConnection = c.trust.verifier(addr) // read under Client.mu: dials run within an attempt
	}
	if cert := c.identity; identity && cert != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	tc := tls.Client(raw, cfg)
	c.stats.handshakes.Add(1)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if tc.ConnectionState().DidResume {
		c.stats.resumed.Add(1)
	}
	return tc, nil
}

// conn returns the connection to addr, made if there is none (or the
// last one broke). A request that is not bootstrap gets a connection
// whose certificate was checked. Called with c.mu held.
func (c *Client) conn(ctx context.Context, addr string, bootstrap bool) (*serverConn, error) {
	identity := !bootstrap && c.identity != nil && !c.certless[addr]
	if sc := c.conns[addr]; sc != nil {
		if sc.cc.Err() == nil && (bootstrap || sc.verified && sc.identity == identity) {
			return sc, nil
		}
		c.dropConn(addr)
	}
	if !bootstrap && c.trust == nil {
		return nil, errors.New("agent: the servers' CA is not known yet")
	}
	t := c.verifying
	switch {
	case c.trust == nil: // bootstrap: identity is false
		t = c.bootstrapping
	case identity:
		t = c.presenting
	}
	cc, err := t.NewClientConn(ctx, "https", addr)
	if err != nil {
		return nil, err
	}
	sc := &serverConn{cc: cc, verified: c.trust != nil, identity: identity}
	c.conns[addr] = sc
	return sc, nil
}

// dropConn closes the connection to addr. Called with c.mu held.
func (c *Client) dropConn(addr string) {
	if sc := c.conns[addr]; sc != nil {
		sc.cc.Close()
		delete(c.conns, addr)
	}
}

// call is one request of an attempt.
type call struct {
	method, path string
	body         []byte // a CSR, for POST
	node         bool   // carries the node headers: the server checks the password
	bootstrap    bool   // /cacerts before the CA is known
	// check, if set, checks a 200 answer. As for a 401, the configured
	// server decides: its failure ends the request, and a server learnt
	// that fails is left out while the request moves on.
	check func(answer) error
}

func (r call) String() string { return r.method + " " + r.path }

// answer is a server's 200 to a call.
type answer struct {
	addr string
	body []byte
	tls  *tls.ConnectionState
	sc   *serverConn
}

// maxBody bounds a response body: a certificate chain or the server's
// configuration is a few KiB.
const maxBody = 4 << 20

// do sends r to the servers in turn (order) until one answers it. A
// failure of the server's moves it to the next server at once (try); a
// refusal ends it. Called with c.mu held.
func (c *Client) do(ctx context.Context, r call) (answer, error) {
	order := c.order(r)
	if len(order) == 0 {
		return answer{}, errors.New("agent: no server to ask")
	}
	var errs []error
	for i, addr := range order {
		if i > 0 {
			c.stats.failovers.Add(1)
		}
		a, next, err := c.try(ctx, addr, r)
		if !next {
			if r.node && err == nil {
				c.nodeServer = addr
			}
			if c.failing[addr] && !ended(ctx) && !local.Shortage(err) { // it answered
				delete(c.failing, addr)
				c.log.Info("agent: the server answers again", "server", addr)
			}
			return a, err
		}
		c.logFailure(addr, r, err, i < len(order)-1 && !ended(ctx))
		errs = append(errs, inner{err})
		if ended(ctx) {
			break
		}
	}
	return answer{}, fmt.Errorf("agent: %s: no server answered: %w", r, errors.Join(errs...))
}

// order is the servers r goes to, in turn: those not left out, in
// round-robin order (rotation.order). A node-password request starts at
// the server that accepted the last one instead, if it is up: it has
// the password in its cache (nodepass's Verifier) and checks it again
// without scrypt.
func (c *Client) order(r call) []string {
	order := c.servers.order(time.Now())
	if i := slices.Index(order, c.nodeServer); r.node && i > 0 {
		order = slices.Insert(slices.Delete(order, i, i+1), 0, c.nodeServer)
	}
	return order
}

// logFailure logs a server's failure at r: at Info when the server was
// answering, at Debug while it keeps failing, so that a server down for
// minutes logs one line, not one per attempt. next reports that the
// request moves on to another server. Called with c.mu held.
func (c *Client) logFailure(addr string, r call, err error, next bool) {
	msg := "agent: the server failed"
	if next {
		msg += "; moving on to the next server"
	}
	level := slog.LevelInfo
	if c.failing[addr] {
		level = slog.LevelDebug
	}
	c.failing[addr] = true
	c.log.Log(context.Background(), level, msg, "server", addr, "request", r.String(), "err", err)
}

// serverFailure is a failure of the server's: the request moves on to
// the next server, and this one is left out until until.
type serverFailure struct {
	err   error
	until time.Time
	asked bool // the server asked for the wait (Retry-After)
}

func (f *serverFailure) Error() string { return f.err.Error() }

// errIdentityRefused is a 401 to a node-password request that presented
// the node's client certificate.
var errIdentityRefused = errors.New("the node's client certificate refused")

// try sends r to addr and decides what comes of it. next reports that
// the request should move to the next server (the failure is addr's);
// otherwise err ends the request. The steps: a connection (connFor), the
// exchange (exchange), what the answer means (readAnswer), and for a
// failure of the server's, how long it is left out (leaveOut).
func (c *Client) try(ctx context.Context, addr string, r call) (a answer, next bool, err error) {
	sc, err := c.connFor(ctx, addr, r)
	if err == nil {
		a, err = c.exchange(ctx, addr, sc, r)
	}
	var f *serverFailure
	switch {
	case err == nil:
	case ended(ctx):
		return answer{}, false, endErr(ctx)
	case errors.Is(err, errIdentityRefused):
		// k3s's supervisor refuses a node's certificate once its Node
		// resource is gone, and k3s's agent asks again on the token
		// alone (pkg/agent/config/config.go getNodeNamedCrt). So does
		// this one, of this server, for the rest of the attempt.
		c.log.Info("agent: the server refused the node's client certificate; asking again without the client certificate", "server", addr, "request", r.String())
		c.certless[addr] = true
		return c.try(ctx, addr, r)
	case errors.As(err, &f):
		c.leaveOut(addr, f)
		return answer{}, true, fmt.Errorf("%s: %w", addr, f.err)
	default:
		return answer{}, false, err
	}
	if r.check != nil {
		if err := r.check(a); err != nil {
			// As for a 401, the configured server decides. A server learnt
			// is not left out: it may serve the other requests, whose
			// connections are checked at the handshake (a server not yet
			// restarted in a CA rotation).
			c.dropConn(addr)
			return answer{}, addr != c.servers.configuredAddr(), err
		}
	}
	return a, false, nil
}

// connFor returns a connection to addr for r. The dial and the TLS
// handshake count against HeaderTimeout: a server that accepts and never
// completes the handshake is left as one that never answers.
func (c *Client) connFor(ctx context.Context, addr string, r call) (*serverConn, error) {
	timeout := fmt.Errorf("no TLS connection within %v", c.opts.HeaderTimeout)
	dctx, cancel := context.WithTimeoutCause(ctx, c.opts.HeaderTimeout, timeout)
	defer cancel()
	sc, err := c.conn(dctx, addr, r.bootstrap)
	if err == nil {
		return sc, nil
	}
	if local.Shortage(err) { // the node's, not the server's: no other server would do better
		return nil, fmt.Errorf("agent: %s: %w", r, err)
	}
	if context.Cause(dctx) == timeout {
		err = timeout
	}
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) && c.trustFromDisk {
		// The CA kept on disk may not be the servers' any more. The
		// other servers are still asked; if the attempt fails, the next
		// fetches the CA again, checked against the token.
		c.log.Warn("agent: the server's certificate does not chain to the CA on disk", "server", addr, "err", err)
		c.caDoubted = true
	}
	return nil, &serverFailure{err: err, until: time.Now().Add(c.opts.RecoveryDelay)}
}

// exchange sends r to addr on sc and reads the answer (readAnswer). A
// server gets HeaderTimeout to answer, but the node-password requests of
// a server that has answered before get the request's whole time: a
// server may hold them while it verifies the password.
func (c *Client) exchange(ctx context.Context, addr string, sc *serverConn, r call) (answer, error) {
	req, err := c.request(ctx, addr, r)
	if err != nil {
		return answer{}, err
	}
	wait := c.opts.HeaderTimeout
	if r.node && sc.answered {
		wait = c.opts.RequestTimeout
	}
	rctx, cancel := context.WithTimeoutCause(ctx, c.opts.RequestTimeout, fmt.Errorf("no answer within %v", c.opts.RequestTimeout))
	defer cancel()
	hctx, hcancel := context.WithCancelCause(rctx)
	defer hcancel(nil)
	timer := time.AfterFunc(wait, func() { hcancel(fmt.Errorf("no response headers within %v", wait)) })
	c.count(addr)
	resp, err := sc.cc.RoundTrip(req.WithContext(hctx))
	timer.Stop()
	if err != nil {
		if cause := context.Cause(hctx); cause != nil {
			err = cause
		}
		return answer{}, &serverFailure{err: err, until: time.Now().Add(c.opts.RecoveryDelay)}
	}
	defer resp.Body.Close()
	sc.answered = true
	return c.readAnswer(hctx, addr, sc, r, resp)
}

// readAnswer is what addr's answer resp to r means. A 200 is an answer,
// its body read within ctx. A 429, a 503 or another 5xx is a
// serverFailure: the server is left out for RecoveryDelay, or for its
// Retry-After (bounded by the backoff's cap), and the request moves on.
// So is a 401 from a server learnt. A 401 to a node-password request that
// presented the node's certificate is errIdentityRefused. Another 401,
// a 403 or another 4xx ends the request.
func (c *Client) readAnswer(ctx context.Context, addr string, sc *serverConn, r call, resp *http.Response) (answer, error) {
	recovery := time.Now().Add(c.opts.RecoveryDelay)
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			if cause := context.Cause(ctx); cause != nil {
				err = cause
			}
			return answer{}, &serverFailure{err: fmt.Errorf("reading the answer: %w", err), until: recovery}
		}
		return answer{addr: addr, body: body, tls: resp.TLS, sc: sc}, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		ra := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return answer{}, &serverFailure{err: fmt.Errorf("%s (Retry-After %v)", resp.Status, ra),
			until: time.Now().Add(min(ra, c.backoff.ceiling())), asked: true}
	case code >= 500:
		return answer{}, &serverFailure{err: errors.New(resp.Status), until: recovery}
	case code == http.StatusUnauthorized && r.node && sc.identity:
		return answer{}, errIdentityRefused
	case code == http.StatusUnauthorized && addr != c.servers.configuredAddr():
		// A server learnt may be an API server, not a supervisor (a list
		// kept with the API servers' port, say): the configured one decides.
		return answer{}, &serverFailure{err: fmt.Errorf("%s to %s (not a supervisor, or the token is wrong)", resp.Status, r), until: recovery}
	case code == http.StatusUnauthorized:
		return answer{}, fmt.Errorf("%w: %s answered %s to %s", ErrTokenRejected, addr, resp.Status, r)
	case code == http.StatusForbidden && r.node:
		return answer{}, fmt.Errorf("%w: %s answered %s for node %q: the password in %s does not match the server's entry for %q (a node of the same name joined with another password?)",
			ErrNodePasswordRejected, addr, resp.Status, c.opts.NodeName, c.passwordSource(), c.opts.NodeName)
	case code == http.StatusForbidden:
		return answer{}, fmt.Errorf("%w: %s answered %s to %s", ErrTokenRejected, addr, resp.Status, r)
	default:
		e := &statusError{addr: addr, call: r, code: code, status: resp.Status, msg: serverMessage(resp.Body)}
		if r.node {
			e.node, e.password = c.opts.NodeName, c.passwordSource()
		}
		return answer{}, e
	}
}

// leaveOut leaves addr out of the rotation after its failure f, until
// f.until, and closes its connection. The wait after a failed attempt is
// at least what a server asked for (askedUntil). Called with c.mu held.
func (c *Client) leaveOut(addr string, f *serverFailure) {
	c.dropConn(addr)
	c.servers.markDown(addr, f.until)
	if f.asked && f.until.After(c.askedUntil) {
		c.askedUntil = f.until
	}
}

// inner is an error of the package as a part of a longer one: without
// its "agent: " prefix, which the longer one has.
type inner struct{ error }

func (e inner) Error() string { return strings.TrimPrefix(e.error.Error(), "agent: ") }
func (e inner) Unwrap() error { return e.error }

// statusError is a 4xx answer other than 401, 403 and 429; it wraps
// ErrRefused, and ErrNoRoute for a 404.
type statusError struct {
	addr   string
	call   call
	code   int
	status string
	msg    string // the server's message (serverMessage)
	// node and password name the node and its password's source, for a
	// node-password request.
	node, password string
}

func (e *statusError) Unwrap() error { return ErrRefused }

func (e *statusError) Is(target error) bool {
	return target == ErrNoRoute && e.code == http.StatusNotFound
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("agent: %s answered %s to %s", e.addr, e.status, e.call)
	if e.msg != "" {
		s += ": " + e.msg
	}
	if r := e.refused(); r != "" {
		s += " (" + r + ")"
	}
	return s
}

// refused says which of the node's name and password a 400 to a
// node-password request refused, as far as the server's message tells;
// "" for another answer, or a message about neither (an address, a CSR).
// k3s says "node name not set", "node password not set" or "header node
// name does not match auth node name" (pkg/nodepassword/validate.go
// GetNodeAuthValidator); nodepass's httpauth "missing K3s-Node-Name
// header", or "invalid node name or password", which does not tell.
func (e *statusError) refused() string {
	if e.code != http.StatusBadRequest || e.node == "" {
		return ""
	}
	m := strings.ToLower(e.msg)
	name := strings.Contains(m, "name")
	password := strings.Contains(m, "password")
	switch {
	case name && password:
		return fmt.Sprintf("the node name %q or the password from %s; the answer does not say which", e.node, e.password)
	case name:
		return fmt.Sprintf("the server refused the node name %q", e.node)
	case password:
		return fmt.Sprintf("the server refused the node password from %s", e.password)
	}
	return ""
}

// serverMessage is the message of an error answer: a Kubernetes
// Status's, as k3s sends them (pkg/util/apierrors.go SendError), or the
// first line of the body, at most 200 bytes either way.
func serverMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	var status struct{ Kind, Message string }
	if json.Unmarshal(b, &status) == nil && status.Kind == "Status" && status.Message != "" {
		b = []byte(status.Message)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 200 {
		line = strings.ToValidUTF8(line[:200], "") + "..."
	}
	return line
}

// request makes r's HTTP request to addr: basic auth as the user "node"
// (or the bootstrap token) but for /cacerts, and the node headers on the
// node-password requests.
func (c *Client) request(ctx context.Context, addr string, r call) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, "https://"+addr+r.path, body)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if !r.bootstrap {
		if c.tok.Bootstrap != "" {
			req.Header.Set("Authorization", "Bearer "+c.tok.Bootstrap)
		} else {
			req.SetBasicAuth("node", c.tok.Password)
		}
	}
	if r.node {
		req.Header.Set(c.header+"-Node-Name", c.opts.NodeName)
		req.Header.Set(c.header+"-Node-Password", c.password)
		req.Header.Set(c.header+"-Node-Ip", joinIPs(c.ips))
	}
	return req, nil
}

func (c *Client) count(addr string) {
	c.stats.requests.Add(1)
	c.statsMu.Lock()
	c.perSrv[addr]++
	c.statsMu.Unlock()
}

// retryAfter parses a Retry-After header (seconds or an HTTP date); an
// absent or unparsable one counts as one second, what Kubernetes API
// servers send with their 429s. A wait past a century counts as a
// century (callers bound it by the backoff's cap).
func retryAfter(h string, now time.Time) time.Duration {
	const most = 100 * 365 * 24 * time.Hour
	if s, err := strconv.ParseUint(strings.TrimSpace(h), 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return time.Duration(min(s, uint64(most/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(t.Sub(now), 0), most)
	}
	return time.Second
}
