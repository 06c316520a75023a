package bench

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// scriptTarget answers each step of the HTTPS sequence with status[step]
// (0: a failed connection) and records the steps asked, in order.
type scriptTarget struct {
	status map[step]int
	asked  []step
}

func (s *scriptTarget) steps() []step { return httpSteps }

func (s *scriptTarget) do(_ context.Context, _, _ int, _ Node, st step, _ string) outcome {
	s.asked = append(s.asked, st)
	if code := s.status[st]; code != 0 {
		return outcome{status: code, handshakes: 1}
	}
	return outcome{connErr: true, handshakes: 1}
}

func (s *scriptTarget) close() {}

// TestAttemptSequence checks the requests of one attempt: the probe of
// /cacerts expected to fail, then the rest in order until one fails; a
// probe that succeeds skips fetching the CA.
func TestAttemptSequence(t *testing.T) {
	ok := map[step]int{stepCACertsInsecure: 200, stepCACerts: 200, stepConfig: 200, stepClientCA: 200, stepServerCA: 200,
		stepServingCert: 200, stepClientCert: 200, stepProxyCert: 200, stepControllerCert: 200}
	with := func(s step, code int) map[step]int {
		m := map[step]int{}
		for k, v := range ok {
			m[k] = v
		}
		m[s] = code
		return m
	}
	for _, c := range []struct {
		name   string
		status map[step]int
		want   int
		asked  []step
	}{
		{"every request answered", ok, 200, httpSteps},
		{"the host's roots trust the server", with(stepCACertsProbe, 200), 200, append([]step{stepCACertsProbe}, httpSteps[3:]...)},
		{"config refused", with(stepConfig, 429), 429, httpSteps[:4]},
		{"token rejected", with(stepConfig, 401), 401, httpSteps[:4]},
		{"server CA refused", with(stepServerCA, 429), 429, httpSteps[:6]},
		{"wrong password", with(stepServingCert, 403), 403, httpSteps[:7]},
		{"client certificate shed", with(stepClientCert, 503), 503, httpSteps[:8]},
		{"controller certificate shed", with(stepControllerCert, 429), 429, httpSteps},
		{"no CA", with(stepCACertsInsecure, 0), 0, httpSteps[:2]},
	} {
		tgt := &scriptTarget{status: c.status}
		o, requests, handshakes := attempt(t.Context(), tgt, time.Second, 0, 0, Node{Name: "n", Password: "p"}, fakeToken)
		if o.status != c.want || !slices.Equal(tgt.asked, c.asked) || requests != len(c.asked) || handshakes != len(c.asked) {
			t.Errorf("%s: %+v after %v (%d requests, %d handshakes); want %d after %v", c.name, o, tgt.asked, requests, handshakes, c.want, c.asked)
		}
		if guarded := slices.Contains(c.asked, stepServingCert); guarded == o.guardedAt.IsZero() {
			t.Errorf("%s: guarded request sent at %v", c.name, o.guardedAt)
		}
	}
}

// TestRequestsPerAttempt: an in-process attempt is the seven
// authenticated requests; one that fails at the second is counted once,
// as a shed attempt, and its retry sends all seven.
func TestRequestsPerAttempt(t *testing.T) {
	f := &fakeTarget{
		answer: func(context.Context, int, int, int) outcome { return outcome{status: http.StatusOK} },
		later: func(_ context.Context, _, _, attempt int) outcome {
			if attempt == 1 {
				return outcome{status: http.StatusServiceUnavailable, retryAfter: time.Second}
			}
			return outcome{status: http.StatusOK}
		},
	}
	res := runFake(t, Scenario{Nodes: 10}, f)
	if res.Joined != 10 || res.Attempts != 20 || res.Requests != 90 || res.Shed != 10 || res.Handshakes != 0 {
		t.Errorf("joined %d: %d attempts, %d requests, %d shed, %d handshakes; want 10: 20, 90, 10, 0",
			res.Joined, res.Attempts, res.Requests, res.Shed, res.Handshakes)
	}
	if got := res.PerNode(res.Requests); got != 9 {
		t.Errorf("%v requests per node, want 9", got)
	}
}

// TestAttemptTimeoutPerRequest: each request of an attempt has its own
// client timeout, as an agent's HTTP client does.
func TestAttemptTimeoutPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &fakeTarget{
			answer: func(context.Context, int, int, int) outcome {
				time.Sleep(6 * time.Second)
				return outcome{status: http.StatusOK}
			},
			later: func(ctx context.Context, _, _, _ int) outcome {
				select {
				case <-ctx.Done():
					return outcome{timeout: true}
				case <-time.After(6 * time.Second):
					return outcome{status: http.StatusOK}
				}
			},
		}
		start := time.Now()
		o, requests, _ := attempt(t.Context(), slow, 10*time.Second, 0, 0, Node{}, fakeToken)
		if o.status != http.StatusOK || requests != 7 || time.Since(start) != 42*time.Second {
			t.Errorf("seven requests of 6 s under a 10 s timeout each: %+v after %d requests, %v", o, requests, time.Since(start))
		}
	})
}
