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
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// logBuffer collects log lines; the budget's timer writes from its own
// goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// refusingInvalid returns a handler behind an Auth whose Verifier
// refuses every request as invalid, and its log.
func refusingInvalid(t *testing.T) (http.Handler, *logBuffer) {
	t.Helper()
	logs := new(logBuffer)
	invalid := verifierFunc(func(context.Context, string, string) error {
		return fmt.Errorf("%w: password is 2000 bytes, limit 1024", verify.ErrInvalidInput)
	})
	a, err := httpauth.New(invalid, &httpauth.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a.Middleware(http.NotFoundHandler()), logs
}

// sendInvalid sends n requests with invalid input to h, each answered 400.
func sendInvalid(t *testing.T, h http.Handler, n int) {
	t.Helper()
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

const (
	invalidLine = `msg="httpauth: invalid node name or password"`
	invalidHeld = `msg="httpauth: invalid node names or passwords: lines not logged, over the log budget"`
)

// TestInvalidInputLogBounded: a client sending invalid node names or
// passwords as fast as it can gets 400 every time, but the log gets 10
// lines at once and then one per 6 s, the first of them after a line
// counting the ones held back.
func TestInvalidInputLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logs := refusingInvalid(t)
		lines := func(msg string) int { return strings.Count(logs.String(), msg) }
		sendInvalid(t, h, 1000)
		time.Sleep(6*time.Second - time.Nanosecond)
		sendInvalid(t, h, 1)
		if n, m := lines(invalidLine), lines(invalidHeld); n != 10 || m != 0 {
			t.Fatalf("1,001 invalid requests within 6 s logged %d lines and %d counts, want 10 and 0", n, m)
		}
		// httptest.NewRequest's client address: whom to look at.
		if n := lines(" remote=192.0.2.1:1234 "); n != 10 {
			t.Fatalf("%d of 10 lines name the client's address:\n%s", n, logs.String())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait() // the budget's timer fires now too: its count is written
		sendInvalid(t, h, 1)
		if n, m := lines(invalidLine), lines(invalidHeld); n != 11 || m != 1 || !strings.Contains(logs.String(), invalidHeld+" suppressed=991") {
			t.Fatalf("6 s later: %d lines and %d counts, want 11 and 1 saying 991 were held back:\n%s", n, m, logs.String())
		}
	})
}

// TestInvalidInputCountAfterFlood: when a flood of invalid requests
// stops, the count of the lines held back is written 6 s later, with no
// request to carry it.
func TestInvalidInputCountAfterFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, logs := refusingInvalid(t)
		sendInvalid(t, h, 1000)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := strings.Count(logs.String(), invalidHeld+" suppressed=990"); n != 1 {
			t.Fatalf("a minute after a flood of 1,000 invalid requests: %d lines counting the 990 held back, want 1:\n%s", n, logs.String())
		}
	})
}

// TestFailureLogBounded: while the store fails every request (an API
// server outage under a herd), each request gets a 500 and the log gets
// 10 error lines at once, then one a second, the first after a line
// counting those held back. A corrupt stored hash shares the budget.
func TestFailureLogBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
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
		if n := errorLines(); n != 10 {
			t.Fatalf("3,205 failures at once logged %d error lines, want 10:\n%s", n, logs.String())
		}
		time.Sleep(time.Second)
		synctest.Wait() // the budget's timer, which fires now too, has written its count
		send(1, "corrupt", http.StatusForbidden)
		if n := errorLines(); n != 12 || !strings.Contains(logs.String(), `level=ERROR msg="httpauth: server-side failures: lines not logged, over the log budget" suppressed=3195`) ||
			!strings.Contains(logs.String(), "stored node password hash is invalid") {
			t.Fatalf("a second later: %d error lines, want 12 (a count of 3,195 held back, then the corrupt hash):\n%s", n, logs.String())
		}
	})
}

// TestLogClipsClientValues: net/http accepts headers of up to 1 MiB; a
// node name or token user that long, refused as invalid or met by a
// store failure, leaves a log line of a few hundred bytes, over HTTPS,
// with the real Verifier and with one that quotes what it was given in
// its errors.
func TestLogClipsClientValues(t *testing.T) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	quotesNode := verifierFunc(func(_ context.Context, node, _ string) error {
		return fmt.Errorf("%w: node name %q", verify.ErrInvalidInput, node)
	})
	tokenOK := tokenFunc(func(context.Context, string, string) error { return nil })
	quotesUser := tokenFunc(func(_ context.Context, user, _ string) error {
		return fmt.Errorf("store: reading the token of %q: connection refused", user)
	})
	name := strings.Repeat("n", 1_000_000)
	user := strings.Repeat("u", 700_000) // 933 kB in base64
	for _, c := range []struct {
		what  string
		v     httpauth.Verifier
		token httpauth.TokenVerifier
		call  call
		want  int
	}{
		{"a 1 MB node name, the real Verifier", v, tokenOK, call{path: "/node", user: "node", password: "t", node: name, nodePasswd: "pw"}, http.StatusBadRequest},
		{"a 1 MB node name quoted in the error", quotesNode, tokenOK, call{path: "/node", user: "node", password: "t", node: name, nodePasswd: "pw"}, http.StatusBadRequest},
		{"a 700 kB token user quoted by a failing store", v, quotesUser, call{path: "/config", user: user, password: "t"}, http.StatusInternalServerError},
	} {
		a, err := httpauth.New(c.v, &httpauth.Options{Logger: log, Tokens: c.token})
		if err != nil {
			t.Fatal(err)
		}
		before := len(logs.String())
		if resp, _ := c.call.do(t, tokenServer(t, a)); resp.StatusCode != c.want {
			t.Fatalf("%s: status %d, want %d", c.what, resp.StatusCode, c.want)
		}
		written := strings.TrimSpace(logs.String()[before:])
		if written == "" {
			t.Errorf("%s: no log line", c.what)
		}
		for _, line := range strings.Split(written, "\n") {
			if len(line) > 1024 {
				t.Errorf("%s: a log line of %d bytes: %.200s...", c.what, len(line), line)
			}
		}
	}
}
