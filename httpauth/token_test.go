package httpauth_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/verify"
)

// tokenFunc adapts a function to httpauth.TokenVerifier.
type tokenFunc func(ctx context.Context, user, password string) error

func (f tokenFunc) VerifyToken(ctx context.Context, user, password string) error {
	return f(ctx, user, password)
}

// tokenServer serves /node (HandlerFunc: token and node password) and
// /config (TokenHandler: the token alone) with a behind Auth.
func tokenServer(t *testing.T, a *httpauth.Auth) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/node", a.HandlerFunc(func(w http.ResponseWriter, r *http.Request, n httpauth.Node) {
		user, _ := httpauth.TokenUser(r.Context())
		io.WriteString(w, user+" "+n.Name)
	}))
	mux.Handle("/config", a.TokenHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := httpauth.TokenUser(r.Context())
		if !ok {
			http.Error(w, "no user in context", http.StatusTeapot)
			return
		}
		io.WriteString(w, user)
	})))
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

type call struct {
	path             string
	user, password   string // basic auth; none when both are empty
	authHeader       string // a raw Authorization header instead
	node, nodePasswd string
}

func (c call) do(t *testing.T, srv *httptest.Server) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.user != "" || c.password != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	if c.authHeader != "" {
		req.Header.Set("Authorization", c.authHeader)
	}
	if c.node != "" {
		req.Header.Set("K3s-Node-Name", c.node)
		req.Header.Set("K3s-Node-Password", c.nodePasswd)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestTokenStatusCodes(t *testing.T) {
	overload := &verify.OverloadError{After: 1500 * time.Millisecond, Queued: true}
	storeErr := errors.New("token store down: internal-detail")
	tokens := tokenFunc(func(_ context.Context, user, password string) error {
		switch {
		case user == "node" && password == "right":
			return nil
		case password == "busy":
			return overload
		case password == "store":
			return storeErr
		case password == "corrupt":
			return verify.ErrInvalidHash
		case user != "node":
			return verify.ErrNotFound
		}
		return verify.ErrMismatchedHashAndPassword
	})
	nodes := verifierFunc(func(_ context.Context, node, password string) error {
		if password == "node-pw" {
			return nil
		}
		return errMismatch
	})
	var logs strings.Builder
	a, err := httpauth.New(nodes, &httpauth.Options{Tokens: tokens, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := tokenServer(t, a)
	for _, c := range []struct {
		name   string
		call   call
		status int
		body   string
	}{
		{"right token", call{path: "/config", user: "node", password: "right"}, 200, "node"},
		{"token and node password", call{path: "/node", user: "node", password: "right", node: "n1", nodePasswd: "node-pw"}, 200, "node n1"},
		{"missing", call{path: "/config"}, 401, "missing join token"},
		{"missing on a node route", call{path: "/node", node: "n1", nodePasswd: "node-pw"}, 401, "missing join token"},
		{"empty password", call{path: "/config", user: "node"}, 401, "missing join token"},
		{"bearer", call{path: "/config", authHeader: "Bearer abc"}, 401, "missing join token"},
		{"malformed base64", call{path: "/config", authHeader: "Basic !!!"}, 401, "missing join token"},
		{"no colon", call{path: "/config", authHeader: "Basic bm9kZQ=="}, 401, "missing join token"},
		{"wrong", call{path: "/config", user: "node", password: "wrong"}, 401, "join token rejected"},
		{"unknown user", call{path: "/config", user: "nobody", password: "right"}, 401, "join token rejected"},
		{"corrupt stored hash", call{path: "/config", user: "node", password: "corrupt"}, 401, "join token rejected"},
		{"wrong token, right node password", call{path: "/node", user: "node", password: "wrong", node: "n1", nodePasswd: "node-pw"}, 401, "join token rejected"},
		{"right token, wrong node password", call{path: "/node", user: "node", password: "right", node: "n1", nodePasswd: "bad"}, 403, "node password rejected"},
		{"overloaded", call{path: "/config", user: "node", password: "busy"}, 503, "retry later"},
		{"store failure", call{path: "/config", user: "node", password: "store"}, 500, "internal error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := c.call.do(t, srv)
			if resp.StatusCode != c.status || !strings.Contains(body, c.body) {
				t.Fatalf("got %d %q, want %d containing %q", resp.StatusCode, body, c.status, c.body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); (c.status == 401) != (got == `Basic realm="k3s"`) {
				t.Fatalf("WWW-Authenticate %q on a %d", got, c.status)
			}
			if c.status == 503 && resp.Header.Get("Retry-After") != "2" {
				t.Fatalf("Retry-After %q, want 2", resp.Header.Get("Retry-After"))
			}
			if strings.Contains(body, "internal-detail") {
				t.Fatalf("body %q leaks the store's error", body)
			}
		})
	}
	if !strings.Contains(logs.String(), "internal-detail") || !strings.Contains(logs.String(), "stored join token hash is invalid") {
		t.Errorf("log %q lacks the store failure or the corrupt hash", logs.String())
	}
}

// TestTokenCheckedOnce: a node route inside TokenHandler checks the token
// once, then the node password.
func TestTokenCheckedOnce(t *testing.T) {
	var checks atomic.Int32
	tokens := tokenFunc(func(context.Context, string, string) error { checks.Add(1); return nil })
	a, err := httpauth.New(verifierFunc(func(context.Context, string, string) error { return nil }), &httpauth.Options{Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(a.TokenHandler(a.HandlerFunc(func(w http.ResponseWriter, _ *http.Request, n httpauth.Node) {
		io.WriteString(w, n.Name)
	})))
	defer srv.Close()
	resp, body := call{path: "/", user: "node", password: "t", node: "n1", nodePasswd: "p"}.do(t, srv)
	if resp.StatusCode != 200 || body != "n1" || checks.Load() != 1 {
		t.Fatalf("got %d %q after %d token checks, want 200 n1 after 1", resp.StatusCode, body, checks.Load())
	}
}

// TestTokenHandlerWithoutTokens: a route meant to need the token is never
// left open by a missing option, and the mistake is logged once, not once
// per request: a client could otherwise write an ERROR line for each
// request it sends.
func TestTokenHandlerWithoutTokens(t *testing.T) {
	logs := new(logBuffer)
	a, err := httpauth.New(verifierFunc(func(context.Context, string, string) error { return nil }),
		&httpauth.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, path := range []string{"/config", "/cacerts"} {
		mux.Handle(path, a.TokenHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "open")
		})))
	}
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	for i := range 20 {
		c := call{path: "/config", user: "node", password: "anything"}
		if i%2 == 1 {
			c.path = "/cacerts"
		}
		if resp, body := c.do(t, srv); resp.StatusCode != 500 || body == "open" {
			t.Fatalf("got %d %q, want 500", resp.StatusCode, body)
		}
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "TokenHandler without Options.Tokens") {
		t.Fatalf("20 requests refused: %d ERROR lines, want 1 naming the missing option:\n%s", n, logs.String())
	}
}

// TestTokenWithVerifier: a real Verifier behind Auth, many agents at once
// with the right token, a guesser with wrong ones: every agent in, no
// guess in, one scrypt computation for the token.
func TestTokenWithVerifier(t *testing.T) {
	params := verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: params, MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.LoadTokens(context.Background(), strings.NewReader("join-secret,node,node,k3s:agent\n")); err != nil {
		t.Fatal(err)
	}
	a, err := httpauth.New(v, &httpauth.Options{Tokens: v})
	if err != nil {
		t.Fatal(err)
	}
	srv := tokenServer(t, a)
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := range 40 {
		wg.Go(func() {
			c := call{path: "/config", user: "node", password: "join-secret"}
			want := 200
			if i%2 == 1 {
				c.password, want = "guess", 401
			}
			if resp, _ := c.do(t, srv); resp.StatusCode != want {
				bad.Add(1)
			}
		})
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d requests answered wrongly", bad.Load())
	}
	if st := v.Stats(); st.ScryptRuns != 1 {
		t.Fatalf("stats %+v: want the one scrypt that hashed the token at load", st)
	}
}

// TestTokenVariantFirst: over HTTPS, an agent that sends the join token
// with a zero byte after it first (k3s accepts it: its
// pkg/authenticator/hash/scrypt.go hands the token to x/crypto's scrypt,
// whose HMAC pads keys with zeros) does not lock the real token out,
// and a guess is still refused.
func TestTokenVariantFirst(t *testing.T) {
	params := verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
	hash, err := verify.GenerateFromPassword("join-secret", params)
	if err != nil {
		t.Fatal(err)
	}
	tokens := verify.NewMemoryStore()
	tokens.Set("node", hash)
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: params, MaxWait: time.Hour, Tokens: tokens, MaxFailDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	a, err := httpauth.New(v, &httpauth.Options{Tokens: v})
	if err != nil {
		t.Fatal(err)
	}
	srv := tokenServer(t, a)
	for _, c := range []struct {
		password string
		want     int
	}{{"join-secret\x00", 200}, {"join-secret", 200}, {"join-secret\x00\x00", 200}, {"join-secreu", 401}, {"join-secret", 200}} {
		if resp, _ := (call{path: "/config", user: "node", password: c.password}).do(t, srv); resp.StatusCode != c.want {
			t.Fatalf("token %q: %d, want %d", c.password, resp.StatusCode, c.want)
		}
	}
	if st := v.Stats(); st.ScryptRuns != 1 {
		t.Fatalf("stats %+v: want one scrypt for the token and its variants, none for the guess", st)
	}
}
