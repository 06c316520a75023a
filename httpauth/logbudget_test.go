package httpauth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// TestInvalidInputLogBounded: a client sending invalid node names or
// passwords as fast as it can gets 400 every time, but the log gets 10
// lines a minute at most, and the next minute one line counting the
// ones held back.
func TestInvalidInputLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		v := verifierFunc(func(context.Context, string, string) error {
			return fmt.Errorf("%w: password is 2000 bytes, limit 1024", verify.ErrInvalidInput)
		})
		a, err := httpauth.New(v, &httpauth.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		h := a.Middleware(http.NotFoundHandler())
		send := func(n int) {
			for i := range n {
				r := httptest.NewRequest(http.MethodPost, "/v1-k3s/serving-kubelet.crt", nil)
				r.Header.Set("K3s-Node-Name", fmt.Sprint("guess-", i))
				r.Header.Set("K3s-Node-Password", "pw")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusBadRequest {
					t.Fatalf("status %d, want 400", w.Code)
				}
			}
		}
		lines := func(msg string) int { return strings.Count(logs.String(), fmt.Sprintf("msg=%q", msg)) }
		const invalid, held = "httpauth: invalid node name or password", "httpauth: invalid node name or password (and more not logged, over the budget)"
		send(1000)
		time.Sleep(59 * time.Second)
		send(10)
		if n, m := lines(invalid), lines(held); n != 10 || m != 0 {
			t.Fatalf("1,010 invalid requests within a minute logged %d lines and %d counts, want 10 and 0", n, m)
		}
		time.Sleep(time.Second)
		send(1)
		if n, m := lines(invalid), lines(held); n != 11 || m != 1 || !strings.Contains(logs.String(), "suppressed=1000") {
			t.Fatalf("the next minute: %d lines and %d counts, want 11 and 1 saying 1000 were held back:\n%s", n, m, logs.String())
		}
	})
}

// TestFailureLogBounded: while the store fails every request (an API
// server outage under a herd), each request gets a 500 and the log gets
// 10 error lines per 10 s at most; the next window starts with one line
// counting those held back. A corrupt stored hash shares the budget.
func TestFailureLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		storeDown := errors.New("kube: get kube-system/worker.node-password.k3s: connection refused")
		v := verifierFunc(func(_ context.Context, node, _ string) error {
			if node == "corrupt" {
				return fmt.Errorf("%w: bad salt", verify.ErrInvalidHash)
			}
			return storeDown
		})
		a, err := httpauth.New(v, &httpauth.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		h := a.Middleware(http.NotFoundHandler())
		send := func(n int, node string, want int) {
			for range n {
				r := httptest.NewRequest(http.MethodPost, "/v1-k3s/serving-kubelet.crt", nil)
				r.Header.Set("K3s-Node-Name", node)
				r.Header.Set("K3s-Node-Password", "pw")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != want {
					t.Fatalf("node %s: status %d, want %d", node, w.Code, want)
				}
			}
		}
		errorLines := func() int { return strings.Count(logs.String(), "level=ERROR") }
		send(3200, "worker", http.StatusInternalServerError)
		send(5, "corrupt", http.StatusForbidden)
		time.Sleep(9 * time.Second)
		if n := errorLines(); n != 10 {
			t.Fatalf("3,205 failures within 10 s logged %d error lines, want 10:\n%s", n, logs.String())
		}
		time.Sleep(time.Second)
		send(1, "corrupt", http.StatusForbidden)
		if n := errorLines(); n != 12 || !strings.Contains(logs.String(), "suppressed=3195") ||
			!strings.Contains(logs.String(), "stored node password hash is invalid") {
			t.Fatalf("the next 10 s: %d error lines, want 12 (a count of 3,195 held back, then the corrupt hash):\n%s", n, logs.String())
		}
	})
}
