package bench

import (
	"testing"
	"time"
)

// clientScenario is testHerd over HTTPS with nodepass's agent.Client as
// the agents, every duration scaled to a tenth (a 0.5 s header timeout),
// the deadline long enough for a starved machine.
func clientScenario() Scenario {
	s := httpScenario
	s.Agent = ClientPolicy{}
	s.ClientTimeout = 10 * time.Second
	return s
}

// TestClientAgentsHerd runs the Client as the herd's agents against every
// model: every node joins, asking for each certificate once, over about
// one TLS handshake each (k3s agents: ten per attempt), and nodepass's
// servers run one scrypt per node.
func TestClientAgentsHerd(t *testing.T) {
	h := testHerd(t)
	for _, model := range Models() {
		t.Run(model, func(t *testing.T) {
			res, err := Run(t.Context(), clientScenario(), h, model)
			if err != nil {
				t.Fatal(err)
			}
			if res.Joined != 30 || res.Stopped != "" || res.Agent != PolicyNodepass {
				t.Fatalf("joined %d, stopped %q, agent %q", res.Joined, res.Stopped, res.Agent)
			}
			// A cold join: /cacerts, config, the two CA files and four
			// certificates (the join does not ask /apiservers, as k3s's
			// pkg/agent/config does not).
			if res.CertsRequested < 4*30 || res.Requests < 8*30 {
				t.Errorf("%d certificates, %d requests for 30 nodes; want 4 and 8 per node at least", res.CertsRequested, res.Requests)
			}
			// One connection per agent and server, kept alive; a retry may
			// make another, and so may each request given up on a timeout
			// or a connection error (the Client drops that connection):
			// a loaded machine makes the k3s models time out.
			if most := 2*30 + res.Timeouts + res.ConnErrors; res.Handshakes > most || res.Handshakes < 30 {
				t.Errorf("%d TLS handshakes for 30 nodes (%d timeouts, %d connection errors), want about one each", res.Handshakes, res.Timeouts, res.ConnErrors)
			}
			if model == ModelNodepass && res.ScryptRuns != 30 {
				t.Errorf("nodepass: %d scrypt runs for 30 nodes, want 30", res.ScryptRuns)
			}
		})
	}
}

// TestHungServer: with one server of three hung (it completes the TLS
// handshake, then never answers) and the agents remembering only it,
// nodepass's agents all join through a healthy server; k3s's, sticking to
// the server they remember, none do.
func TestHungServer(t *testing.T) {
	h := testHerd(t)
	sc := clientScenario()
	sc.Servers, sc.Hung, sc.Known = 3, 1, 1
	res, err := Run(t.Context(), sc, h, ModelNodepass)
	if err != nil {
		t.Fatal(err)
	}
	if res.Joined != 30 || res.Stopped != "" || res.Failovers == 0 {
		t.Errorf("nodepass agents: joined %d, stopped %q, %d failovers", res.Joined, res.Stopped, res.Failovers)
	}
	sc.Agent = JitterPolicy{Min: 5 * time.Second, Max: 10 * time.Second}
	sc.Deadline = 3 * time.Minute // 18 s, scaled: a dozen attempts, each one client timeout
	res, err = Run(t.Context(), sc, h, ModelNodepass)
	if err != nil {
		t.Fatal(err)
	}
	if res.Joined != 0 || res.Stopped != StoppedDeadline || res.Timeouts == 0 {
		t.Errorf("k3s agents: joined %d, stopped %q, %d timeouts; want none in, stopped at the deadline", res.Joined, res.Stopped, res.Timeouts)
	}
}

// TestValidCerts: agents that reboot with valid certificates on disk.
// nodepass's request none and cost the servers no node-password scrypt;
// k3s's request all four again.
func TestValidCerts(t *testing.T) {
	h := testHerd(t)
	for _, c := range []struct {
		agent     Policy
		requested bool
	}{{ClientPolicy{}, false}, {JitterPolicy{Min: 5 * time.Second, Max: 10 * time.Second}, true}} {
		for _, model := range []string{ModelK3sLatest, ModelNodepass} {
			t.Run(c.agent.String()+"/"+model, func(t *testing.T) {
				sc := clientScenario()
				sc.Agent, sc.ValidCerts = c.agent, true
				res, err := Run(t.Context(), sc, h, model)
				if err != nil {
					t.Fatal(err)
				}
				if res.Joined != 30 || res.Stopped != "" {
					t.Fatalf("joined %d, stopped %q", res.Joined, res.Stopped)
				}
				nodeScrypt := res.ScryptRuns - res.TokenScryptRuns
				if !c.requested && (res.CertsRequested != 0 || nodeScrypt != 0) {
					t.Errorf("%d certificates requested, %d node-password computations; want none", res.CertsRequested, nodeScrypt)
				}
				if c.requested && nodeScrypt == 0 {
					t.Errorf("k3s agents cost no node-password computation: they request their certificates again")
				}
			})
		}
	}
}

func TestClientPolicyNeedsHTTP(t *testing.T) {
	for _, sc := range []Scenario{
		{Agent: ClientPolicy{}}, {Hung: 1, Servers: 2}, {ValidCerts: true},
		{Mode: ModeHTTP, Servers: 2, Hung: 2}, {Mode: ModeHTTP, Servers: 2, Known: 3},
	} {
		if err := sc.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v: no error", sc)
		}
	}
	if p, err := ParsePolicy("nodepass-lb"); err != nil || !p.(ClientPolicy).ViaLoadBalancer || p.String() != "nodepass-lb" {
		t.Errorf("ParsePolicy(nodepass-lb) = %v, %v", p, err)
	}
}
