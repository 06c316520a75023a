package verify

import (
	"context"
	"time"

	"github.com/nodepass/nodepass/verify/internal/sched"
)

// WithArrival returns a copy of ctx saying that its request came at t
// (its connection's accept, say, before a TLS handshake): Verify and
// Ensure count Options.MaxWait from t, for holding the caller and for its
// password's place in the queue. httpauth.ArrivalHandler sets it. A t in
// the future is ignored.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return sched.WithArrival(ctx, t)
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	return sched.Arrival(ctx)
}
