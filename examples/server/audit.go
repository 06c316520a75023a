package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nodepass/nodepass/internal/logbudget"
	"github.com/nodepass/nodepass/verify"
)

// audit logs what an operator needs to see of the server's answers to
// agents: refused join tokens (401), refused node passwords (403),
// invalid node names or passwords and refused certificate requests
// (400) and new nodes, each with the node or token user, the remote
// address and the reason, never a password or a token. Each kind of
// line has a budget of its own, auditBurst lines at once and then one
// per auditEvery, so that a guesser cannot flood the log, and a flood
// of one kind (a stranger's unknown user names) never hides a line of
// another (a second machine under a node's name). The lines held back
// are counted (logbudget.Budget). Every value a client sent is clipped
// (logbudget.Clip). It is safe for concurrent use.
type audit struct {
	budgets [auditKinds]*logbudget.Budget // fixed by newAudit
	created sync.Map                      // node -> struct{}: created by the store, its enrollment not yet logged
}

// auditKind is a kind of audit line, with a budget of its own.
type auditKind int

const (
	tokenRefused    auditKind = iota // 401: a wrong join token, an unknown user
	passwordRefused                  // 403: a password that does not match the node's stored hash
	hashUnreadable                   // 403 or 401: a stored hash that cannot be read
	nodeUnknown                      // 401: no stored hash, and the Verifier does not enroll
	nodeInvalid                      // 400: a node name or password the Verifier refuses to check
	requestRefused                   // 400: a certificate request refused after the node's password was checked
	nodeEnrolled                     // a new node got its first certificate
	auditKinds
)

// auditKindNames name each kind in the lines counting those held back.
var auditKindNames = [auditKinds]string{"server: refused join tokens", "server: refused node passwords",
	"server: unreadable stored hashes", "server: unknown nodes", "server: invalid node names or passwords",
	"server: refused certificate requests", "server: enrolled nodes"}

// The log budget of each kind of audit line.
const (
	auditBurst = 20
	auditEvery = 3 * time.Second // 20 a minute once the burst is spent
)

func newAudit(log *slog.Logger) *audit {
	a := &audit{}
	for k := range a.budgets {
		a.budgets[k] = logbudget.New(log, auditKindNames[k], auditBurst, auditEvery)
	}
	return a
}

// line logs msg with args, and the request's remote address, within the
// budget of kind.
func (a *audit) line(ctx context.Context, kind auditKind, level slog.Level, msg string, args ...any) {
	a.budgets[kind].Log(ctx, level, msg, append(args, "remote", logbudget.Clip(remoteAddr(ctx)))...)
}

// nodeChecked logs a refused node password. A node the check created is
// logged once it gets its certificate (issued).
func (a *audit) nodeChecked(ctx context.Context, node string, err error) {
	node = logbudget.Clip(node)
	switch {
	case errors.Is(err, verify.ErrMismatchedHashAndPassword):
		a.line(ctx, passwordRefused, slog.LevelWarn, "server: node password refused", "status", http.StatusForbidden, "node", node,
			"reason", "the password does not match the node's stored hash (another machine with this name, or the node's password file was lost)")
	case errors.Is(err, verify.ErrInvalidHash):
		a.line(ctx, hashUnreadable, slog.LevelWarn, "server: node password refused", "status", http.StatusForbidden, "node", node,
			"reason", "the node's stored hash cannot be read")
	case errors.Is(err, verify.ErrNotFound):
		a.line(ctx, nodeUnknown, slog.LevelWarn, "server: node password refused", "status", http.StatusUnauthorized, "node", node,
			"reason", "unknown node")
	case errors.Is(err, verify.ErrInvalidInput):
		a.line(ctx, nodeInvalid, slog.LevelWarn, "server: node password refused", "status", http.StatusBadRequest, "node", node,
			"reason", logbudget.ClipError(err))
	}
}

// tokenChecked logs a refused join token.
func (a *audit) tokenChecked(ctx context.Context, user string, err error) {
	kind, reason := tokenRefused, ""
	switch {
	case err == nil:
		return
	case errors.Is(err, verify.ErrMismatchedHashAndPassword):
		reason = "wrong token for the user"
	case errors.Is(err, verify.ErrNotFound):
		reason = "unknown user"
	case errors.Is(err, verify.ErrInvalidInput):
		reason = "invalid user name or token"
	case errors.Is(err, verify.ErrInvalidHash):
		kind, reason = hashUnreadable, "the user's stored token hash cannot be read"
	default:
		return // not a refusal: overload, shutdown, a client that left
	}
	a.line(ctx, kind, slog.LevelWarn, "server: join token refused", "status", http.StatusUnauthorized, "user", logbudget.Clip(user), "reason", reason)
}

// issued logs a new node once a certificate is issued to it: the first
// success of a node the store created. A request that fails after the
// node's password was stored (a refused certificate request) logs no
// enrollment; the node's next success does.
func (a *audit) issued(ctx context.Context, node string) {
	if _, ok := a.created.LoadAndDelete(node); ok {
		a.line(ctx, nodeEnrolled, slog.LevelInfo, "server: node enrolled", "node", logbudget.Clip(node))
	}
}

// refused logs a certificate request answered 400 after the join token
// or the node's password was checked: who is the node's name or the
// token user (key says which), why is what the client was told.
func (a *audit) refused(ctx context.Context, key, who string, why error) {
	a.line(ctx, requestRefused, slog.LevelWarn, "server: certificate request refused", "status", http.StatusBadRequest, key, logbudget.Clip(who),
		"reason", logbudget.ClipError(why))
}

// warnAndAbove is the log as httpauth gets it: its lines at slog.LevelWarn
// and above, its server-side failures. Its Info lines, invalid node names
// and passwords (httpauth.Options.Logger), are the audit's nodeInvalid
// lines, which say who asked.
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn && h.Handler.Enabled(ctx, level)
}

func (h warnAndAbove) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(attrs)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}

type remoteKey struct{}

// withRemote puts each request's remote address in its context, for the
// audit lines.
func withRemote(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), remoteKey{}, r.RemoteAddr)))
	})
}

func remoteAddr(ctx context.Context) string {
	s, _ := ctx.Value(remoteKey{}).(string)
	return s
}

// auditedVerifier is the Verifier as httpauth calls it, each outcome told
// to audit.
type auditedVerifier struct {
	v *verify.Verifier
	a *audit
}

// Ensure implements httpauth.Verifier.
func (x auditedVerifier) Ensure(ctx context.Context, node, password string) error {
	err := x.v.Ensure(ctx, node, password)
	x.a.nodeChecked(ctx, node, err)
	return err
}

// VerifyToken implements httpauth.TokenVerifier.
func (x auditedVerifier) VerifyToken(ctx context.Context, user, password string) error {
	err := x.v.VerifyToken(ctx, user, password)
	x.a.tokenChecked(ctx, user, err)
	return err
}

// watched returns store telling a of each node it creates, so that the
// request that enrolled it logs so. It keeps the optional interface of
// the stores the server uses (verify.FreshGetter, kube's).
func (a *audit) watched(store verify.DigestStore) verify.Store {
	w := &watchedStore{DigestStore: store, a: a}
	if f, ok := store.(verify.FreshGetter); ok {
		return &watchedFreshStore{w, f}
	}
	return w
}

type watchedStore struct {
	verify.DigestStore
	a *audit
}

// Create implements verify.Store.
func (s *watchedStore) Create(ctx context.Context, node, hash string) error {
	err := s.DigestStore.Create(ctx, node, hash)
	if err == nil {
		s.a.created.Store(node, struct{}{})
	}
	return err
}

type watchedFreshStore struct {
	*watchedStore
	verify.FreshGetter
}
