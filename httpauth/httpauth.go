// Package httpauth is net/http middleware that checks the node-password
// headers k3s and RKE2 agents send (K3s-Node-Name, K3s-Node-Password,
// K3s-Node-Ip, or Rke2-... for RKE2) and answers like a k3s server does:
//
//	400 Bad Request          missing or invalid headers, invalid node name or password
//	401 Unauthorized         unknown node (a Verifier that does not enroll)
//	403 Forbidden            wrong password, or a stored hash that cannot be read
//	503 Service Unavailable  overloaded or shutting down; Retry-After says when to come back
//	500 Internal Server Error store failure
//
// On success the wrapped handler runs with the verified Node in the request
// context (see NodeFromContext). A stored hash that cannot be parsed is
// answered 403, as k3s does: its agent then points the operator at the
// secret, where a 500 makes it retry silently for ever.
//
// With Options.Tokens, Auth also checks the join token k3s agents send as
// basic auth ("node:<password>") before the node password, as k3s's
// supervisor does on every route but /cacerts; TokenHandler checks the
// token alone, for the routes that need no node password. A missing,
// malformed or wrong token, or an unknown user, is answered 401 with
// WWW-Authenticate: Basic, and its other failures as the node password's.
// What the store said goes to the Logger only.
//
// An http.Server whose handler is wrapped in ArrivalHandler, with
// ConnContext set, dates each request from when its client started
// waiting, its TLS handshake included, for the Verifier's MaxWait:
//
//	srv := &http.Server{Handler: httpauth.ArrivalHandler(mux), ConnContext: httpauth.ConnContext}
package httpauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/internal/logbudget"
	"github.com/nodepass/nodepass/verify"
)

// Verifier is what Auth calls for each request: *verify.Verifier, or
// anything that returns the verify package's errors.
type Verifier interface {
	Ensure(ctx context.Context, node, password string) error
}

// TokenVerifier checks a basic-auth join token: *verify.Verifier
// (VerifyToken), or anything that returns the verify package's errors.
type TokenVerifier interface {
	VerifyToken(ctx context.Context, user, password string) error
}

// Options configure an Auth. A nil *Options means the defaults.
type Options struct {
	// Program selects the header prefix: "k3s" (default) reads
	// K3s-Node-Name, K3s-Node-Password and K3s-Node-Ip; "rke2" reads
	// Rke2-Node-Name and so on (lower-case letters and digits).
	Program string
	// Logger receives server-side failures (store errors, corrupt stored
	// hashes) at Error, 10 at once then one a second, and invalid node
	// names or passwords at Info with the client's address, 10 at once
	// then one per 6 s. Lines past a budget are counted in one line;
	// values a client sent are clipped. nil means slog.Default().
	Logger *slog.Logger
	// Tokens, if not nil, checks the basic-auth join token of every
	// request Auth handles, before the node password. nil: no token
	// check, and TokenHandler refuses every request.
	Tokens TokenVerifier
}

// Node is a verified node.
type Node struct {
	// Name is the node name from the request, lower-cased as k3s does.
	Name string
	// IP is the node's K3s-Node-Ip header as sent (possibly empty or a
	// comma-separated list); Auth does not check it.
	IP string
}

// Auth checks node-password headers. It is safe for concurrent use; the
// zero value is not usable, use New.
type Auth struct {
	v                  Verifier
	tokens             TokenVerifier
	challenge          string // the WWW-Authenticate value of a 401
	log                *slog.Logger
	nameHdr, pwHdr, ip string
	undated            sync.Once         // warns of ConnContext without ArrivalHandler
	untokened          sync.Once         // logs TokenHandler without Options.Tokens
	invalid, failures  *logbudget.Budget // see log.go
}

// New returns an Auth that verifies with v.
func New(v Verifier, opts *Options) (*Auth, error) {
	if v == nil {
		return nil, errors.New("httpauth: nil Verifier")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.Program = cmp.Or(o.Program, "k3s")
	for _, c := range o.Program {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return nil, fmt.Errorf("httpauth: invalid Program %q: want lower-case letters and digits", o.Program)
		}
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	prefix := http.CanonicalHeaderKey(o.Program + "-Node-")
	a := &Auth{
		v:         v,
		tokens:    o.Tokens,
		challenge: fmt.Sprintf("Basic realm=%q", o.Program),
		log:       o.Logger,
		nameHdr:   prefix + "Name",
		pwHdr:     prefix + "Password",
		ip:        prefix + "Ip",
	}
	a.invalid, a.failures = newLogBudgets(o.Logger)
	return a, nil
}

type ctxKey struct{}

// NodeFromContext returns the Node that Auth verified for this request.
func NodeFromContext(ctx context.Context) (Node, bool) {
	n, ok := ctx.Value(ctxKey{}).(Node)
	return n, ok
}

type userKey struct{}

// TokenUser returns the basic-auth user whose join token Auth verified
// for this request.
func TokenUser(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(userKey{}).(string)
	return u, ok
}

// TokenHandler returns a handler that checks each request's join token
// (Options.Tokens) and, on success, calls next with the user in the
// request context (see TokenUser); Middleware and HandlerFunc inside it
// do not check it again. Without Options.Tokens it refuses every
// request with 500, and logs why once: a route meant to be guarded is
// never left open.
func (a *Auth) TokenHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.tokens == nil {
			a.untokened.Do(func() {
				a.log.ErrorContext(r.Context(), "httpauth: TokenHandler without Options.Tokens refuses every request (logged once)")
			})
			http.Error(w, "internal error: no token check configured", http.StatusInternalServerError)
			return
		}
		if r, ok := a.checkToken(w, r); ok {
			next.ServeHTTP(w, r)
		}
	})
}

// checkToken verifies r's join token, unless an outer handler did, and
// answers r when it fails. It returns r with the verified user.
func (a *Auth) checkToken(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	if _, done := TokenUser(r.Context()); done {
		return r, true
	}
	user, password, ok := r.BasicAuth()
	if !ok || user == "" || password == "" {
		a.unauthorized(w, "missing join token (basic auth)")
		return r, false
	}
	err := a.tokens.VerifyToken(r.Context(), user, password)
	switch {
	case err == nil:
		return r.WithContext(context.WithValue(r.Context(), userKey{}, user)), true
	case errors.Is(err, verify.ErrMismatchedHashAndPassword), errors.Is(err, verify.ErrNotFound),
		errors.Is(err, verify.ErrInvalidInput):
		a.unauthorized(w, "join token rejected")
	case errors.Is(err, verify.ErrInvalidHash):
		a.logFailure(r.Context(), "httpauth: stored join token hash is invalid; rewrite the token file", "user", user, err)
		a.unauthorized(w, "join token rejected")
	default:
		a.failOther(w, r, "join token check failed", "user", user, err)
	}
	return r, false
}

// unauthorized answers 401 with the basic-auth challenge.
func (a *Auth) unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", a.challenge)
	http.Error(w, msg, http.StatusUnauthorized)
}

// Middleware returns a handler that verifies each request and, on success,
// calls next with the verified Node in the request context.
func (a *Auth) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r, node, ok := a.check(w, r); ok {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, node)))
		}
	})
}

// HandlerFunc adapts fn, which is given the verified Node, into a handler
// that verifies each request first.
func (a *Auth) HandlerFunc(fn func(http.ResponseWriter, *http.Request, Node)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r, node, ok := a.check(w, r); ok {
			fn(w, r, node)
		}
	})
}

// check verifies r's join token (with Options.Tokens) and node
// password, and answers r when either fails.
func (a *Auth) check(w http.ResponseWriter, r *http.Request) (*http.Request, Node, bool) {
	if a.tokens != nil {
		var ok bool
		if r, ok = a.checkToken(w, r); !ok {
			return r, Node{}, false
		}
	}
	node, ok := a.checkNode(w, r)
	return r, node, ok
}

// checkNode verifies r's node password and answers r when it fails.
func (a *Auth) checkNode(w http.ResponseWriter, r *http.Request) (Node, bool) {
	node, password, err := a.parse(r.Header)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return Node{}, false
	}
	ctx := r.Context()
	if _, dated := verify.Arrival(ctx); !dated && ctx.Value(connKey{}) != nil {
		a.undated.Do(func() {
			a.log.WarnContext(ctx, "httpauth: the server sets ConnContext but its handler is not wrapped in ArrivalHandler; requests are dated from their check, so MaxWait does not count the TLS handshake")
		})
	}
	err = a.v.Ensure(ctx, node.Name, password)
	if err == nil {
		return node, true
	}
	a.fail(w, r, node.Name, err)
	return Node{}, false
}

// parse reads the node headers. Its errors, which name a header, are the
// client's answer.
func (a *Auth) parse(h http.Header) (Node, string, error) {
	names, pws := h.Values(a.nameHdr), h.Values(a.pwHdr)
	switch {
	case len(names) == 0 || names[0] == "":
		return Node{}, "", fmt.Errorf("missing %s header", a.nameHdr)
	case len(pws) == 0 || pws[0] == "":
		return Node{}, "", fmt.Errorf("missing %s header", a.pwHdr)
	case len(names) > 1:
		return Node{}, "", fmt.Errorf("more than one %s header", a.nameHdr)
	case len(pws) > 1:
		return Node{}, "", fmt.Errorf("more than one %s header", a.pwHdr)
	}
	return Node{Name: strings.ToLower(names[0]), IP: h.Get(a.ip)}, pws[0], nil
}

// fail answers a failed node password check.
func (a *Auth) fail(w http.ResponseWriter, r *http.Request, node string, err error) {
	switch {
	case errors.Is(err, verify.ErrMismatchedHashAndPassword):
		http.Error(w, "node password rejected", http.StatusForbidden)
	case errors.Is(err, verify.ErrInvalidHash):
		a.logFailure(r.Context(), "httpauth: stored node password hash is invalid; rewrite or delete the node's secret", "node", node, err)
		http.Error(w, "node password rejected", http.StatusForbidden)
	case errors.Is(err, verify.ErrInvalidInput):
		a.logInvalid(r, node, err)
		http.Error(w, "invalid node name or password", http.StatusBadRequest)
	case errors.Is(err, verify.ErrNotFound):
		http.Error(w, "unknown node", http.StatusUnauthorized)
	default:
		a.failOther(w, r, "node password check failed", "node", node, err)
	}
}

// failOther answers a failed check whose error is not about the
// credentials: overload and shutdown (503), a client that left, and
// anything else (500, logged).
func (a *Auth) failOther(w http.ResponseWriter, r *http.Request, what, key, who string, err error) {
	var retry interface{ RetryAfter() time.Duration }
	switch {
	case errors.As(err, &retry) || errors.Is(err, verify.ErrOverloaded):
		secs := 1
		if retry != nil {
			secs = retryAfterSeconds(retry.RetryAfter())
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		http.Error(w, "server busy verifying node passwords, retry later", http.StatusServiceUnavailable)
	case errors.Is(err, verify.ErrClosed):
		// Agents go to another server; one that honours Retry-After comes
		// back here soon, in case this one restarts.
		w.Header().Set("Retry-After", "1")
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
	case r.Context().Err() != nil:
		// The client has gone; nobody reads this answer.
		http.Error(w, "request cancelled", http.StatusServiceUnavailable)
	default:
		a.logFailure(r.Context(), "httpauth: "+what, key, who, err)
		http.Error(w, "internal error: "+what, http.StatusInternalServerError)
	}
}

// retryAfterSeconds turns d into a Retry-After value: whole seconds,
// rounded up, from 1 to 2^31-1.
func retryAfterSeconds(d time.Duration) int {
	return int(min(max(math.Ceil(d.Seconds()), 1), math.MaxInt32))
}

// ConnContext records when each connection came, for an http.Server's
// ConnContext field; ArrivalHandler hands that time to the connection's
// first request. A connection comes when it is accepted or, on Linux for
// TCP, when the kernel last received from it before it was accepted
// (TCP_INFO, in clock ticks of up to 10 ms): under a herd the accept
// loop can run seconds behind the kernel's handshakes. Without
// ArrivalHandler, ConnContext dates nothing, and an Auth logs so once.
func ConnContext(ctx context.Context, nc net.Conn) context.Context {
	now := time.Now()
	c := &conn{came: now}
	if age, ok := connAge(nc); ok {
		c.came = now.Add(-age)
	}
	c.first.Store(true)
	return context.WithValue(ctx, connKey{}, c)
}

// ArrivalHandler dates every request before h serves it
// (verify.WithArrival), so that the Verifier holds a request at most its
// MaxWait from when its client started waiting. The first request on a
// connection, whatever its route, is dated from when the connection came
// (ConnContext): its client's timeout started before the TLS handshake.
// Every later request is dated from when it reaches ArrivalHandler: a
// kept-alive connection may have been open for minutes. Wrap the
// server's whole handler, not a route.
func ArrivalHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		if c, ok := r.Context().Value(connKey{}).(*conn); ok && c.first.CompareAndSwap(true, false) {
			at = c.came
		}
		h.ServeHTTP(w, r.WithContext(verify.WithArrival(r.Context(), at)))
	})
}

type connKey struct{}

// conn is what ConnContext records of a connection.
type conn struct {
	came  time.Time   // when the connection came; set once, then read-only
	first atomic.Bool // no request on it has been dated yet
}
