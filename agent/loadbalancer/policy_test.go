package loadbalancer

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// selection is a LoadBalancer without a network, for the choice alone:
// n servers, every one healthy, the turn starting where r says (nil: 0).
func selection(p policy, n int, r *rand.Rand) *LoadBalancer {
	lb := &LoadBalancer{opts: Options{policy: p}}
	if r != nil {
		lb.next.Store(r.Uint64())
	}
	for i := range n {
		lb.servers = append(lb.servers, &server{addr: strconv.Itoa(i), conns: make(map[*pipe]struct{}), health: health{state: StateHealthy}})
	}
	return lb
}

// connect opens one connection as serve does when the first candidate's
// dial succeeds, and returns the server's index.
func connect(lb *LoadBalancer) int {
	s := lb.candidates()[0]
	lb.attach(s, &pipe{}, true)
	i, _ := strconv.Atoi(s.addr)
	return i
}

// Round robin against least connections, on the cases that tell them
// apart. One agent's connections, and a herd of agents with two each, are
// spread evenly by both. When a failed server recovers, least
// connections sends it every new connection of every agent (a herd on
// the server that has just come back); round robin, a third. The figures
// are logged for BENCHMARKS.md.
func TestPolicies(t *testing.T) {
	const agents = 300
	for _, name := range []string{"roundrobin", "leastconns"} {
		p := policies[name]
		r := rand.New(rand.NewPCG(1, 2))

		one := selection(p, 3, r)
		var single [3]int
		for range 300 {
			single[connect(one)]++
		}

		var herd [3]int
		for range agents {
			lb := selection(p, 3, r)
			for range 2 {
				herd[connect(lb)]++
			}
		}

		newToC, newTotal := 0, 0
		for range agents {
			lb := selection(p, 3, r)
			c := lb.servers[2]
			c.health.state = StateFailed
			for range 6 { // the kubelet's, containerd's, the agent's... on a and b
				connect(lb)
			}
			c.health.state = StateHealthy
			for range 3 {
				if connect(lb) == 2 {
					newToC++
				}
				newTotal++
			}
		}
		share := float64(newToC) / float64(newTotal)
		t.Logf("policy=%s: one agent, 300 connections: %v; %d agents, 2 connections each: %v; after a server recovers, %.0f %% of the new connections go to it",
			name, single, agents, herd, 100*share)

		for i := range 3 {
			if abs(float64(single[i])/100-1) > 0.10 || abs(float64(herd[i])/(2*agents/3)-1) > 0.10 {
				t.Errorf("policy=%s: uneven: %v, %v", name, single, herd)
			}
		}
		if want := map[string]bool{"roundrobin": share < 0.4, "leastconns": share > 0.9}; !want[name] {
			t.Errorf("policy=%s: %.2f of the new connections to the recovered server", name, share)
		}
	}
}
