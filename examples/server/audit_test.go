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
	"testing/synctest"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// TestAuditLines: over HTTPS, a new node, a refused node password (403),
// an invalid node name (400) and refused join tokens (401) each leave one
// log line naming the node or user, the remote address and the reason,
// and no password or token is ever logged. (k3s logs every refusal with
// the client's address: pkg/util/apierrors.go SendError.)
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
	if status, _ := s.join(t, "Bad_Name", n.password, n.ip); status != http.StatusBadRequest {
		t.Fatalf("invalid node name: %d", status)
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
		"enrollment":     `level=INFO msg="server: node enrolled" node=` + node + ` ` + remote,
		"node password":  `level=WARN msg="server: node password refused" status=403 node=` + node + ` reason="the password does not match the node's stored hash[^"]*" ` + remote,
		"node name":      `level=WARN msg="server: node password refused" status=400 node=bad_name reason="verify: invalid input: node name \\"bad_name\\" cannot name its secret(\\"|[^"])*" ` + remote,
		"node name once": `bad_name.*\n`,
		"wrong token":    `level=WARN msg="server: join token refused" status=401 user=node reason="wrong token for the user" ` + remote,
		"unknown user":   `level=WARN msg="server: join token refused" status=401 user=nobody reason="unknown user" ` + remote,
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

// TestAuditBudget: a guesser's refusals are logged up to the budget of
// their kind (auditBurst at once, then one per auditEvery), the next line
// comes after one saying how many were held back, and each kind has a
// budget of its own.
func TestAuditBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newOutput()
		a := newAudit(slog.New(slog.NewTextHandler(buf, nil)))
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
		a.issued(ctx, "worker-1")
		count := func(s string) int { return strings.Count(buf.String(), s) }
		if tokens, passwords := count("join token refused"), count("node password refused"); tokens != auditBurst || passwords != auditBurst ||
			count("node enrolled") != 1 || count("not logged") != 0 {
			t.Fatalf("%d token and %d password refusals logged, want %d each; %d enrollments, want 1:\n%s", tokens, passwords, auditBurst, count("node enrolled"), buf)
		}
		time.Sleep(auditEvery - time.Nanosecond)
		a.tokenChecked(ctx, "node", verify.ErrNotFound)
		if count("join token refused") != auditBurst {
			t.Fatalf("a refusal logged before the budget allows:\n%s", buf)
		}
		time.Sleep(time.Nanosecond)
		a.tokenChecked(ctx, "node", verify.ErrNotFound)
		if !strings.Contains(buf.String(), `level=WARN msg="server: refused join tokens: lines not logged, over the log budget" suppressed=31`) || count("join token refused") != auditBurst+1 {
			t.Errorf("after %v: want a line saying 31 token refusals were held back, then the refusal:\n%s", auditEvery, buf)
		}
		// The password refusals held back are counted once no more come.
		time.Sleep(auditEvery)
		synctest.Wait()
		if !strings.Contains(buf.String(), `level=WARN msg="server: refused node passwords: lines not logged, over the log budget" suppressed=30`) {
			t.Errorf("no line counting the 30 password refusals held back:\n%s", buf)
		}
		// Not refusals: no line, no budget spent.
		before := buf.String()
		a.tokenChecked(ctx, "node", nil)
		a.tokenChecked(ctx, "node", errors.New("verify: overloaded"))
		a.nodeChecked(ctx, "worker-2", nil)
		a.issued(ctx, "worker-2") // not created by the store: not new
		if buf.String() != before {
			t.Errorf("a line for what is no refusal or enrollment:\n%s", buf)
		}
		// Invalid node names, with a budget of their own.
		for range auditBurst + 5 {
			a.nodeChecked(ctx, "bad_name", fmt.Errorf("%w: node name", verify.ErrInvalidInput))
		}
		if n := count("status=400 node=bad_name"); n != auditBurst {
			t.Errorf("%d invalid node names logged, want %d:\n%s", n, auditBurst, buf)
		}
	})
}

// TestAuditStrangerCannotHideRefusedPassword: a client with no
// credential keeps the join token refusals' budget spent (an unknown
// user, refused at once, one request per auditEvery after a burst), for
// ten minutes; every 403 of a second machine under a node's name during
// that time is logged.
func TestAuditStrangerCannotHideRefusedPassword(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		buf := newOutput()
		a := newAudit(slog.New(slog.NewTextHandler(buf, nil)))
		stranger := context.WithValue(context.Background(), remoteKey{}, "198.51.100.9:50000")
		machine := context.WithValue(context.Background(), remoteKey{}, "192.0.2.44:41000")
		for range auditBurst {
			a.tokenChecked(stranger, "nobody", verify.ErrNotFound)
		}
		for i := range 200 {
			a.tokenChecked(stranger, "nobody", verify.ErrNotFound)
			if i%20 == 7 {
				a.nodeChecked(machine, "worker-1", verify.ErrMismatchedHashAndPassword)
			}
			time.Sleep(auditEvery)
		}
		if n := strings.Count(buf.String(), `msg="server: node password refused" status=403 node=worker-1`); n != 10 {
			t.Fatalf("%d of the 10 refused passwords logged:\n%s", n, buf)
		}
	})
}

// TestAuditKindsApart: over HTTPS, refused join tokens past their
// budget (unknown users) do not hide the next refused node password.
func TestAuditKindsApart(t *testing.T) {
	s := startWithToken(t, "join-secret\n", "join-secret")
	n := nodes(2)[1]
	if status, body := s.join(t, n.name, n.password, n.ip); status != http.StatusOK {
		t.Fatalf("join: %d %s", status, body)
	}
	s.tokenUser = "nobody"
	for range auditBurst + 5 {
		if resp, _ := s.get(t, "/v1-k3s/config", "", "", ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("unknown user: %d", resp.StatusCode)
		}
	}
	s.tokenUser = ""
	if status, _ := s.join(t, n.name, "wrong-node-password", n.ip); status != http.StatusForbidden {
		t.Fatalf("wrong node password: %d", status)
	}
	if !strings.Contains(s.out.String(), `level=WARN msg="server: node password refused" status=403 node=`+strings.ToLower(n.name)) {
		t.Errorf("the 403 was not logged after %d refused tokens:\n%s", auditBurst+5, s.out)
	}
}
