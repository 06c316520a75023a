package httpauth

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/nodepass/nodepass/internal/logbudget"
)

// The log budgets of Options.Logger: a guesser chooses its invalid
// names, and in a store outage every request of a herd fails alike; the
// operator needs the first lines and the count, not one per request.
const (
	invalidLogBurst = 10
	invalidLogEvery = 6 * time.Second // 10 a minute
	failureLogBurst = 10
	failureLogEvery = time.Second
)

// newLogBudgets returns the budgets of an Auth's two kinds of lines.
func newLogBudgets(log *slog.Logger) (invalid, failures *logbudget.Budget) {
	return logbudget.New(log, "httpauth: invalid node names or passwords", invalidLogBurst, invalidLogEvery),
		logbudget.New(log, "httpauth: server-side failures", failureLogBurst, failureLogEvery)
}

// logInvalid logs r's invalid node name or password at Info, within its
// budget, with the client's address.
func (a *Auth) logInvalid(r *http.Request, node string, err error) {
	a.invalid.Log(r.Context(), slog.LevelInfo, "httpauth: invalid node name or password", "node", logbudget.Clip(node), "remote", r.RemoteAddr, "err", logbudget.ClipError(err))
}

// logFailure logs a server-side failure at Error, within its budget: key
// names what was checked (node or user), who the client sent.
func (a *Auth) logFailure(ctx context.Context, msg, key, who string, err error) {
	a.failures.Log(ctx, slog.LevelError, msg, key, logbudget.Clip(who), "err", logbudget.ClipError(err))
}
