package verify

import (
	"context"
	"time"

	"github.com/nodepass/nodepass/verify/internal/sched"
)

// WithArrival returns a copy of ctx saying that its request came at t (its
// connection's accept, say): Options.MaxWait counts from t, a t in the
// future aside. httpauth.ArrivalHandler sets it.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return sched.WithArrival(ctx, t)
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	return sched.Arrival(ctx)
}
