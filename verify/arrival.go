package verify

import (
	"context"
	"time"
)

type arrivalKey struct{}

// WithArrival returns a copy of ctx saying that its request came at t (its
// connection's accept, say): Options.MaxWait counts from t, a t in the
// future aside. httpauth.ArrivalHandler sets it.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(arrivalKey{}).(time.Time)
	return t, ok
}
