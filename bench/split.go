package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodepass/nodepass/verify"
)

// A split run is Run cut in two, so that the servers and their agents
// each have CPUs of their own (cmd/bench -split): StartServers in one
// process, NewAgents in the other with the servers' Endpoint; Servers.Begin
// and Agents.Run with the same start time; then Servers.Finish with what
// the agents report. Both sides take the same Scenario and Herd. A split
// run is over HTTPS and has no attackers or duplicates.

// Endpoint is where a split run's servers listen: a URL per server and the
// CA that signed their certificates, PEM-encoded.
type Endpoint struct {
	URLs []string `json:"urls"`
	CA   []byte   `json:"ca_pem"`
	// CAKey is the CA's key (PEM): the agents' side signs the
	// certificates an earlier join left them (Scenario.ValidCerts).
	CAKey []byte `json:"ca_key_pem,omitempty"`
}

// Split says how a split run's two processes ran: the CPUs each was pinned
// to and its GOMAXPROCS (set by whoever pinned them), and the CPU time the
// agents' process used during the run. The Result's CPU and Procs are then
// the servers' process's.
type Split struct {
	AgentCPUs   []int         `json:"agent_cpus"`
	ServerCPUs  []int         `json:"server_cpus"`
	AgentProcs  int           `json:"agent_procs"`
	ServerProcs int           `json:"server_procs"`
	AgentCPU    time.Duration `json:"agent_cpu_s"`
}

// MarshalJSON writes s with its tags' keys, AgentCPU in seconds.
func (s Split) MarshalJSON() ([]byte, error) { return marshalUnits(s, nil) }

// UnmarshalJSON reads what MarshalJSON wrote.
func (s *Split) UnmarshalJSON(b []byte) error { return unmarshalUnits(b, s) }

// StartServers estimates the local lower bound when sc asks for it,
// starts sc.Servers instances of the model (after a reboot's warm-up, if
// any) and serves them over HTTPS on loopback ports: the server side of a
// split run.
func StartServers(ctx context.Context, sc Scenario, h *Herd, modelName string) (*Servers, error) {
	sc, err := checkScenario(sc, h, modelName, true)
	if err != nil {
		return nil, err
	}
	return startServers(ctx, sc, h, modelName, newTracker(h.Nodes, nil, sc.Servers, h.Token), false)
}

// Endpoint returns where the servers listen.
func (s *Servers) Endpoint() Endpoint { return s.https.endpoint() }

// Tripped is closed when the heap guard trips: the agents are to be
// stopped (Agents.Run's halt).
func (s *Servers) Tripped() <-chan struct{} { return s.smp.guard.done }

// Finish returns the run's Result: the agents' figures in rep, with this
// side's (heap, CPU time, scrypt runs, readiness, arrivals, bounds), and
// Split's CPU figures. It fails when rep is not of this run's herd.
func (s *Servers) Finish(ctx context.Context, rep *AgentReport) (*Result, error) {
	if rep == nil || rep.Result == nil || rep.Result.Nodes != len(s.h.Nodes) || len(rep.Asks) != len(s.h.Nodes) {
		return nil, errors.New("bench: the agents' report is not of this herd")
	}
	for _, a := range rep.Asks {
		if a.Server < 0 || a.Server >= s.sc.Servers {
			return nil, fmt.Errorf("bench: the agents' report names server %d of %d", a.Server, s.sc.Servers)
		}
	}
	res := *rep.Result
	res.Split = &Split{AgentCPU: res.CPU, AgentProcs: res.Procs}
	res.CPU = 0
	s.finish(ctx, &res, rep.Asks)
	res.Split.ServerProcs = res.Procs
	return &res, nil
}

// Agents is the agent side of a split run: the herd's agents, each with
// its own key and certificate requests, against the servers at an
// Endpoint.
type Agents struct{ r *run }

// NewAgents prepares the agents of h's nodes against ep: their clients,
// keys and certificate requests.
func NewAgents(ctx context.Context, sc Scenario, h *Herd, ep Endpoint) (*Agents, error) {
	sc, err := checkScenario(sc, h, "", true)
	if err != nil {
		return nil, err
	}
	if len(ep.URLs) != sc.Servers {
		return nil, fmt.Errorf("bench: %d server URLs for %d servers", len(ep.URLs), sc.Servers)
	}
	r := newRun(sc, h.Nodes, h.Token)
	if err := r.connect(ctx, ep); err != nil {
		return nil, err
	}
	return &Agents{r}, nil
}

// Run starts every agent at start (waiting until then) and returns their
// report once every node has joined or the run has stopped: at its
// deadline, when ctx ends, or when halt closes (the servers' heap guard
// tripped; nil: never).
func (a *Agents) Run(ctx context.Context, start time.Time, halt <-chan struct{}) *AgentReport {
	a.r.halt = halt
	res := a.r.execute(ctx, start)
	if !a.r.sc.NoDrain {
		a.r.target.close()
	}
	a.r.clients.close()
	return &AgentReport{Result: res, Asks: a.r.lastAsk}
}

// AgentReport is what a split run's agents report to its servers: their
// figures, and how each agent's asking ended. It survives a JSON round
// trip.
type AgentReport struct {
	Result *Result `json:"result"`
	Asks   []asked `json:"asks"`
}

// herdStore returns a fresh memory store holding h's hashes, and the
// store the servers use over it: the same, or sc's fault-injecting store
// (then also returned as faults).
func herdStore(sc Scenario, h *Herd) (mem *verify.MemoryStore, store verify.Store, faults *faultStore) {
	mem = verify.NewMemoryStore()
	for _, n := range h.Nodes {
		mem.Set(n.Name, n.Hash)
	}
	store = mem
	if faults = newFaultStore(mem, sc); faults != nil {
		store = faults
	}
	return mem, store, faults
}
