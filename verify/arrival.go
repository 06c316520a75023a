package verify

import (
	"context"
	"time"
)

type arrivalKey struct{}

// WithArrival returns ctx saying that its request came at t (its
// connection's accept): Options.MaxWait counts from t, if t is past.
// httpauth.ArrivalHandler sets it.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, arrivalKey{}, t)
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	t, ok := ctx.Value(arrivalKey{}).(time.Time)
	return t, ok
}
