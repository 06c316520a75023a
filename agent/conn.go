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
	raw, err := c.opts.Dial(ctx, "tcp", addr)
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
	case c.trust == nil:
		t, identity = c.bootstrapping, false
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

// do sends r to the servers in turn (rotation.order) until one answers
// it: a connection failure, a timeout, a 429, 503 or other 5xx moves it to
// the next server at once, and leaves the server out for RecoveryDelay (or
// for its Retry-After, bounded by the backoff's cap, on 429 and 503).
// 401 (but from a server learnt), 403 and other 4xx end the request with
// an error. A node-password request starts at the server that accepted
// the last one, if it is up.
// Called with c.mu held.
func (c *Client) do(ctx context.Context, r call) (answer, error) {
	order := c.servers.order(time.Now())
	if len(order) == 0 {
		return answer{}, errors.New("agent: no server to ask")
	}
	if i := slices.Index(order, c.nodeServer); r.node && i > 0 {
		// The server that accepted the node's password last has it in
		// its cache (nodepass's Verifier): asked first, it checks the
		// password again without scrypt.
		order = slices.Insert(slices.Delete(order, i, i+1), 0, c.nodeServer)
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

// try sends r to addr. next reports that the request should move to the
// next server (the failure is addr's); otherwise err ends the request.
func (c *Client) try(ctx context.Context, addr string, r call) (a answer, next bool, err error) {
	down := func(until time.Time, err error) (answer, bool, error) {
		c.servers.markDown(addr, until)
		c.dropConn(addr)
		return answer{}, true, fmt.Errorf("%s: %w", addr, err)
	}
	recovery := time.Now().Add(c.opts.RecoveryDelay)
	// The dial and the TLS handshake count against HeaderTimeout: a server
	// that accepts and never completes the handshake is left as one that
	// never answers.
	dctx, dcancel := context.WithTimeout(ctx, c.opts.HeaderTimeout)
	sc, err := c.conn(dctx, addr, r.bootstrap)
	dcancel()
	if err != nil {
		if ended(ctx) {
			return answer{}, false, endErr(ctx)
		}
		if local.Shortage(err) { // the node's, not the server's: no other server would do better
			return answer{}, false, fmt.Errorf("agent: %s: %w", r, err)
		}
		var verr *tls.CertificateVerificationError
		if errors.As(err, &verr) && c.trustFromDisk {
			// The CA kept on disk may not be the servers' any more. The
			// other servers are still asked; if the attempt fails, the
			// next fetches the CA again, checked against the token.
			c.log.Warn("agent: the server's certificate does not chain to the CA on disk", "server", addr, "err", err)
			c.caDoubted = true
		}
		return down(recovery, err)
	}
	req, err := c.request(ctx, addr, r)
	if err != nil {
		return answer{}, false, err
	}
	// A server gets HeaderTimeout to answer, but the node-password
	// requests of a server that has answered before get the request's
	// whole time: a server may hold them while it verifies the password.
	wait := c.opts.HeaderTimeout
	if r.node && sc.answered {
		wait = c.opts.RequestTimeout
	}
	rctx, cancel := context.WithTimeoutCause(ctx, c.opts.RequestTimeout, errRequestTimeout)
	defer cancel()
	hctx, hcancel := context.WithCancelCause(rctx)
	defer hcancel(nil)
	timer := time.AfterFunc(wait, func() { hcancel(errHeaderTimeout) })
	c.count(addr)
	resp, err := sc.cc.RoundTrip(req.WithContext(hctx))
	timer.Stop()
	if err != nil {
		if ended(ctx) {
			return answer{}, false, endErr(ctx)
		}
		if cause := context.Cause(hctx); cause != nil {
			err = fmt.Errorf("%w (%v)", cause, wait)
		}
		return down(recovery, err)
	}
	defer resp.Body.Close()
	sc.answered = true
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
		if err != nil {
			if ended(ctx) {
				return answer{}, false, endErr(ctx)
			}
			if cause := context.Cause(hctx); cause != nil {
				err = cause
			}
			return down(recovery, fmt.Errorf("reading the answer: %w", err))
		}
		a := answer{addr: addr, body: body, tls: resp.TLS, sc: sc}
		if r.check != nil {
			if err := r.check(a); err != nil {
				// Not marked down: a server learnt may serve the other
				// requests, whose connections are checked at the
				// handshake (a server not yet restarted in a CA rotation).
				c.dropConn(addr)
				return answer{}, addr != c.servers.configuredAddr(), err
			}
		}
		return a, false, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		ra := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		until := time.Now().Add(min(ra, c.backoff.ceiling()))
		if until.After(c.askedUntil) {
			c.askedUntil = until
		}
		return down(until, fmt.Errorf("%s (Retry-After %v)", resp.Status, ra))
	case code >= 500:
		return down(recovery, errors.New(resp.Status))
	case code == http.StatusUnauthorized && r.node && sc.identity:
		// k3s's supervisor refuses a node's certificate once its Node
		// resource is gone, and k3s's agent asks again on the token
		// alone (pkg/agent/config/config.go getNodeNamedCrt). So does
		// this one, of this server, for the rest of the attempt.
		c.log.Info("agent: the server refused the node's client certificate; asking again without the client certificate", "server", addr, "request", r.String())
		c.certless[addr] = true
		resp.Body.Close()
		return c.try(ctx, addr, r)
	case code == http.StatusUnauthorized && addr != c.servers.configuredAddr():
		// A server learnt may be an API server, not a supervisor (a list
		// kept with the API servers' port, say): the configured one decides.
		return down(recovery, fmt.Errorf("%s to %s (not a supervisor, or the token is wrong)", resp.Status, r))
	case code == http.StatusUnauthorized:
		return answer{}, false, fmt.Errorf("%w: %s answered %s to %s", ErrTokenRejected, addr, resp.Status, r)
	case code == http.StatusForbidden && r.node:
		return answer{}, false, fmt.Errorf("%w: %s answered %s for node %q: the password in %s does not match the server's entry for %q (a node of the same name joined with another password?)",
			ErrNodePasswordRejected, addr, resp.Status, c.opts.NodeName, c.passwordSource(), c.opts.NodeName)
	case code == http.StatusForbidden:
		return answer{}, false, fmt.Errorf("%w: %s answered %s to %s", ErrTokenRejected, addr, resp.Status, r)
	default:
		e := &statusError{addr: addr, call: r, code: code, status: resp.Status, msg: serverMessage(resp.Body)}
		if r.node {
			e.node, e.password = c.opts.NodeName, c.passwordSource()
		}
		return answer{}, false, e
	}
}

var (
	errHeaderTimeout  = errors.New("no response headers in time")
	errRequestTimeout = errors.New("the request timed out")
)

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
