package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/nodepass/nodepass/verify"
)

// audit logs what an operator needs to see of the server's answers to
// agents: refused node passwords (403), refused join tokens (401) and
// new nodes, each with the node or token user, the remote address and
// the reason, never a password or a token. Each kind of line has a
// budget, auditBurst lines and then one per auditEvery, so that a guesser
// cannot flood the log; the next line of a kind the budget lets through
// is preceded by one saying how many were suppressed. It is safe for
// concurrent use.
type audit struct {
	log                   *slog.Logger
	now                   func() time.Time
	refusals, enrollments budget
	created               sync.Map // node -> struct{}: created by the store, its line not yet logged
}

// The log budget of each kind of audit line.
const (
	auditBurst = 20
	auditEvery = 3 * time.Second // 20 a minute once the burst is spent
)

func newAudit(log *slog.Logger, now func() time.Time) *audit {
	return &audit{
		log:         log,
		now:         now,
		refusals:    budget{lim: rate.NewLimiter(rate.Every(auditEvery), auditBurst)},
		enrollments: budget{lim: rate.NewLimiter(rate.Every(auditEvery), auditBurst)},
	}
}

// budget is one kind of line's share of the log.
type budget struct {
	lim        *rate.Limiter
	mu         sync.Mutex
	suppressed int // lines refused since the last one let through; guarded by mu
}

// take reports whether a line may be logged at now and, if so, how many
// were suppressed before it.
func (b *budget) take(now time.Time) (ok bool, suppressed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.lim.AllowN(now, 1) {
		b.suppressed++
		return false, 0
	}
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// line logs msg with args within b's budget.
func (a *audit) line(ctx context.Context, b *budget, kind string, level slog.Level, msg string, args ...any) {
	ok, suppressed := b.take(a.now())
	if !ok {
		return
	}
	if suppressed > 0 {
		a.log.Log(ctx, slog.LevelWarn, "server: log budget spent; lines not logged", "kind", kind, "suppressed", suppressed)
	}
	a.log.Log(ctx, level, msg, append(args, "remote", remoteAddr(ctx))...)
}

// nodeChecked logs the outcome of a node password check that says
// something an operator needs: a refusal, or a node the check enrolled.
func (a *audit) nodeChecked(ctx context.Context, node string, err error) {
	node = clip(node)
	switch {
	case err == nil:
		if _, ok := a.created.LoadAndDelete(node); ok {
			a.line(ctx, &a.enrollments, "enrollments", slog.LevelInfo, "server: node enrolled", "node", node)
		}
	case errors.Is(err, verify.ErrMismatchedHashAndPassword):
		a.line(ctx, &a.refusals, "refusals", slog.LevelWarn, "server: node password refused", "status", http.StatusForbidden, "node", node,
			"reason", "the password does not match the node's stored hash (another machine with this name, or the node's password file was lost)")
	case errors.Is(err, verify.ErrInvalidHash):
		a.line(ctx, &a.refusals, "refusals", slog.LevelWarn, "server: node password refused", "status", http.StatusForbidden, "node", node,
			"reason", "the node's stored hash cannot be read")
	case errors.Is(err, verify.ErrNotFound):
		a.line(ctx, &a.refusals, "refusals", slog.LevelWarn, "server: node password refused", "status", http.StatusUnauthorized, "node", node,
			"reason", "unknown node")
	}
}

// tokenChecked logs a refused join token.
func (a *audit) tokenChecked(ctx context.Context, user string, err error) {
	var reason string
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
		reason = "the user's stored token hash cannot be read"
	default:
		return // not a refusal: overload, shutdown, a client that left
	}
	a.line(ctx, &a.refusals, "refusals", slog.LevelWarn, "server: join token refused", "status", http.StatusUnauthorized, "user", clip(user), "reason", reason)
}

// clip shortens what a client sent for the log.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
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
		s.a.created.Store(clip(node), struct{}{})
	}
	return err
}

type watchedFreshStore struct {
	*watchedStore
	verify.FreshGetter
}
