package verify

import (
	"context"
	"time"

	"github.com/nodepass/nodepass/verify/internal/sched"
)

// WithArrival returns a copy of ctx saying that the request it carries came
// at t: its client started waiting then, for instance when its connection
// was accepted, before the TLS handshake. A Verify or Ensure call with such
// a ctx holds its caller at most Options.MaxWait from t rather than from
// the call, so that an agent whose client timeout started before a slow
// handshake is answered before that timeout; the hold-or-send-away
// decision counts the time already spent. Requests under suspicion (a
// first ask for a node that is failing, or one waiting for room in its
// node's queue) wait out MaxWait from t too, and a request that has waited
// out MaxWait from t keeps its password queued (see
// Options.MaxQueuedPerNode): a node whose requests reach the Verifier late
// still gets its password in, and a guesser pays the same, a request in
// progress for MaxWait. httpauth.ConnContext does this for a connection's
// first request. A t in the future is ignored.
func WithArrival(ctx context.Context, t time.Time) context.Context {
	return sched.WithArrival(ctx, t)
}

// Arrival returns the time WithArrival recorded in ctx, if any.
func Arrival(ctx context.Context) (time.Time, bool) {
	return sched.Arrival(ctx)
}
