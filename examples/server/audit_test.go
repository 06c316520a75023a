package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// TestAuditLines: over HTTPS, a new node, a refused node password (403)
// and refused join tokens (401) each leave one log line naming the node
// or user, the remote address and the reason, and no password or token
// is ever logged.
func TestAuditLines(t *testing.T) {
	s := startWithToken(t, "join-secret\n", "join-secret", "-v")
	n := nodes(2)[1]
	node := strings.ToLower(n.name)
	if status, body := s.join(t, n.name, n.password, n.ip); status != http.StatusOK {
		t.Fatalf("join: %d %s", status, body)
	}
	if status, _ := s.join(t, n.name, n.password, n.ip); status != http.StatusOK {
		t.Fatalf("rejoin: %d", status)
	}
	if status, _ := s.join(t, n.name, "wrong-node-password", n.ip); status != http.StatusForbidden {
		t.Fatalf("wrong node password: %d", status)
	}
	s.token = "wrong-join-token"
	if resp, _ := s.get(t, "/v1-k3s/config", "", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	s.token, s.tokenUser = "join-secret", "nobody"
	if resp, _ := s.get(t, "/v1-k3s/config", "", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unknown user: %d", resp.StatusCode)
	}

	out := s.out.String()
	remote := `remote=127\.0\.0\.1:\d+`
	for what, re := range map[string]string{
		"enrollment":    `level=INFO msg="server: node enrolled" node=` + node + ` ` + remote,
		"node password": `level=WARN msg="server: node password refused" status=403 node=` + node + ` reason="the password does not match the node's stored hash[^"]*" ` + remote,
		"wrong token":   `level=WARN msg="server: join token refused" status=401 user=node reason="wrong token for the user" ` + remote,
		"unknown user":  `level=WARN msg="server: join token refused" status=401 user=nobody reason="unknown user" ` + remote,
	} {
		if got := len(regexp.MustCompile(re).FindAllString(out, -1)); got != 1 {
			t.Errorf("%s: %d lines matching %s, want 1:\n%s", what, got, re, out)
		}
	}
	for _, secret := range []string{n.password, "wrong-node-password", "wrong-join-token", "join-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
}

// TestAuditBudget: a guesser's refusals are logged up to the budget
// (auditBurst at once, then one per auditEvery), the next line says how
// many were suppressed, and enrollments have a budget of their own.
func TestAuditBudget(t *testing.T) {
	buf := newOutput()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := newAudit(slog.New(slog.NewTextHandler(buf, nil)), func() time.Time { return now })
	ctx := context.WithValue(context.Background(), remoteKey{}, "192.0.2.7:40000")
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			if i%2 == 0 {
				a.tokenChecked(ctx, "node", verify.ErrMismatchedHashAndPassword)
			} else {
				a.nodeChecked(ctx, fmt.Sprintf("worker-%d", i), fmt.Errorf("wrapped: %w", verify.ErrMismatchedHashAndPassword))
			}
		})
	}
	wg.Wait()
	a.created.Store("worker-1", struct{}{})
	a.nodeChecked(ctx, "worker-1", nil)
	count := func(s string) int { return strings.Count(buf.String(), s) }
	if refused := count("refused"); refused != auditBurst || count("node enrolled") != 1 || count("suppressed") != 0 {
		t.Fatalf("%d refusals logged, want %d; %d enrollments, want 1:\n%s", refused, auditBurst, count("node enrolled"), buf)
	}
	now = now.Add(auditEvery - time.Nanosecond)
	a.tokenChecked(ctx, "node", verify.ErrNotFound)
	if count("refused") != auditBurst {
		t.Fatalf("a refusal logged before the budget allows:\n%s", buf)
	}
	now = now.Add(time.Nanosecond)
	a.tokenChecked(ctx, "node", verify.ErrNotFound)
	if !strings.Contains(buf.String(), `level=WARN msg="server: log budget spent; lines not logged" kind=refusals suppressed=81`) || count("refused") != auditBurst+1 {
		t.Errorf("after %v: want a line saying 81 were suppressed, then the refusal:\n%s", auditEvery, buf)
	}
	// Not refusals: no line, no budget spent.
	a.tokenChecked(ctx, "node", nil)
	a.tokenChecked(ctx, "node", errors.New("verify: overloaded"))
	a.nodeChecked(ctx, "worker-2", nil)
	if count("refused") != auditBurst+1 || count("node enrolled") != 1 {
		t.Errorf("a line for what is no refusal or enrollment:\n%s", buf)
	}
}
