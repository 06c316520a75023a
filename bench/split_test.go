package bench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSplitRun runs a herd cut in two, as cmd/bench -split does with two
// processes: the servers, then the agents against their endpoint, the
// agents' report through JSON, and the result put together: the same
// counts as one process over HTTPS, and the agents' CPU apart.
func TestSplitRun(t *testing.T) {
	h := testHerd(t)
	for _, model := range []string{ModelNodepass, ModelK3sLatest} {
		t.Run("model="+model, func(t *testing.T) {
			srv, res := runSplit(t, httpScenario, h, model)
			if res.Joined != 30 || res.Stopped != "" || res.Model != model || res.Mode != ModeHTTP {
				t.Fatalf("%s %s: joined %d, stopped %q", res.Model, res.Mode, res.Joined, res.Stopped)
			}
			checkAgentCounts(t, res, uint64(len(httpSteps)))
			checkReached(t, res)
			if res.Handshakes != res.Requests || res.Connections != res.Requests {
				t.Errorf("%d requests, %d TLS handshakes, %d connections accepted", res.Requests, res.Handshakes, res.Connections)
			}
			if res.Split == nil || res.Split.AgentCPU <= 0 || res.Split.AgentProcs < 1 || res.Split.ServerProcs != res.Procs {
				t.Errorf("split %+v, procs %d", res.Split, res.Procs)
			}
			if res.PeakHeap == 0 || res.LocalBound <= 0 || res.LocalTransport != 0 || res.Ratio <= 0 || res.RatioBatch <= 0 {
				t.Errorf("peak heap %d, local bound %v (transport %v, want 0: the agents have CPUs of their own), ratios %v %v",
					res.PeakHeap, res.LocalBound, res.LocalTransport, res.Ratio, res.RatioBatch)
			}
			if res.Attack != nil {
				t.Errorf("attack figures %+v for a run without adversity", res.Attack)
			}
			if _, err := srv.Finish(t.Context(), &AgentReport{Result: res}); err == nil {
				t.Error("Finish took a report without the agents' asks")
			}
		})
	}
}

// runSplit runs sc's herd cut in two, as cmd/bench -split does with two
// processes: the servers, then the agents against their endpoint (through
// JSON), the agents' report through JSON, and the result put together.
// The servers are closed at the test's end.
func runSplit(t *testing.T, sc Scenario, h *Herd, model string) (*Servers, *Result) {
	t.Helper()
	srv, err := StartServers(t.Context(), sc, h, model)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(true) })
	var remote Endpoint
	roundTrip(t, srv.Endpoint(), &remote)
	agents, err := NewAgents(t.Context(), sc, h, remote)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(20 * time.Millisecond)
	srv.Begin(start)
	var rep AgentReport
	roundTrip(t, agents.Run(t.Context(), start, srv.Tripped()), &rep)
	res, err := srv.Finish(t.Context(), &rep)
	if err != nil {
		t.Fatal(err)
	}
	return srv, res
}

// roundTrip sets *out to what v reads as through JSON.
func roundTrip[T any](t *testing.T, v any, out *T) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// TestSplitTokenGuessers runs join-token guessers on the agents' side of
// a split run: their counts come from that side, the computations over
// their tokens from the servers', and the same holds as in one process.
func TestSplitTokenGuessers(t *testing.T) {
	h := testHerd(t)
	for _, model := range []string{ModelNodepass, ModelK3sLatest} {
		t.Run("model="+model, func(t *testing.T) {
			sc := httpScenario
			sc.TokenGuessers = 6
			_, res := runSplit(t, sc, h, model)
			checkTokenGuessers(t, res, model, 6, 30)
		})
	}
}

func TestSplitRejects(t *testing.T) {
	h := testHerd(t)
	for _, c := range []struct {
		sc   Scenario
		want string
	}{
		{Scenario{Nodes: 30, LogN: testLogN}, "over HTTPS"},
		{Scenario{Nodes: 30, LogN: testLogN, Mode: ModeHTTP, Attackers: 2}, "no attackers"},
		{Scenario{Nodes: 30, LogN: testLogN, Mode: ModeHTTP, Duplicates: 2}, "no attackers or duplicates"},
	} {
		if _, err := StartServers(t.Context(), c.sc, h, ModelNodepass); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("StartServers(%+v): %v, want an error about %q", c.sc, err, c.want)
		}
		if _, err := NewAgents(t.Context(), c.sc, h, Endpoint{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewAgents(%+v): %v, want an error about %q", c.sc, err, c.want)
		}
	}
	sc := Scenario{Nodes: 30, LogN: testLogN, Mode: ModeHTTP, Servers: 2}
	if _, err := NewAgents(t.Context(), sc, h, Endpoint{URLs: []string{"https://127.0.0.1:1"}}); err == nil {
		t.Error("NewAgents took one URL for two servers")
	}
	var rep AgentReport
	if err := json.Unmarshal([]byte(`{"asks":[]}`), &rep); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Servers{}).Finish(t.Context(), &rep); err == nil {
		t.Error("Finish took a report without a result")
	}
}
