package agent

import (
	"slices"
	"testing"
	"time"
)

// Each Order starts one server further along, and covers every server.
func TestRotationRoundRobin(t *testing.T) {
	s := newRotation("c:1", []string{"a:1", "b:1"})
	now := time.Now()
	first := s.order(now)
	if len(first) != 3 {
		t.Fatalf("Order = %v, want three servers", first)
	}
	starts := map[string]int{}
	for i := range 30 {
		o := s.order(now)
		starts[o[0]]++
		want := s.addrs[(i+1+slices.Index(s.addrs, first[0]))%3]
		if o[0] != want {
			t.Fatalf("Order %d starts at %s, want %s", i, o[0], want)
		}
		sorted := slices.Sorted(slices.Values(o))
		if !slices.Equal(sorted, []string{"a:1", "b:1", "c:1"}) {
			t.Fatalf("Order = %v, want every server once", o)
		}
	}
	for a, n := range starts {
		if n != 10 {
			t.Errorf("%s started %d of 30 orders, want 10", a, n)
		}
	}
}

// A herd of agents starts at random servers.
func TestRotationRandomStart(t *testing.T) {
	starts := map[string]int{}
	for range 3000 {
		starts[newRotation("c:1", []string{"a:1", "b:1"}).order(time.Now())[0]]++
	}
	for _, a := range []string{"a:1", "b:1", "c:1"} {
		if n := starts[a]; n < 800 || n > 1200 {
			t.Errorf("%s first for %d of 3000 agents, want about 1000", a, n)
		}
	}
}

// A server marked down is left out until its time, then back; when every
// server is down, the one back first is the order.
func TestRotationDown(t *testing.T) {
	now := time.Now()
	s := newRotation("c:1", []string{"a:1", "b:1"})
	s.markDown("a:1", now.Add(10*time.Second))
	for range 6 {
		if o := s.order(now); slices.Contains(o, "a:1") || len(o) != 2 {
			t.Fatalf("Order = %v with a:1 down", o)
		}
	}
	if d := s.nextUp(now); d != 0 {
		t.Errorf("NextUp = %v with two servers up", d)
	}
	if o := s.order(now.Add(10 * time.Second)); !slices.Contains(o, "a:1") {
		t.Errorf("Order = %v after a:1's time", o)
	}
	s.markDown("b:1", now.Add(5*time.Second))
	s.markDown("c:1", now.Add(20*time.Second))
	if d := s.nextUp(now); d != 5*time.Second {
		t.Errorf("NextUp = %v, want 5s (b:1)", d)
	}
	if o := s.order(now); !slices.Equal(o, []string{"b:1"}) {
		t.Errorf("Order = %v with every server down, want [b:1], back first", o)
	}
}

// Update replaces the servers learnt, never the configured one, and
// keeps the down time of those that stay.
func TestRotationUpdate(t *testing.T) {
	now := time.Now()
	s := newRotation("c:1", []string{"a:1", "b:1", "a:1", ""})
	if got := s.addresses(); !slices.Equal(got, []string{"a:1", "b:1", "c:1"}) {
		t.Fatalf("Addresses = %v", got)
	}
	s.markDown("b:1", now.Add(time.Minute))
	if !s.update([]string{"b:1", "d:1"}) {
		t.Fatal("Update reported no change")
	}
	if got := s.addresses(); !slices.Equal(got, []string{"b:1", "d:1", "c:1"}) {
		t.Errorf("Addresses = %v, want b, d and the configured c", got)
	}
	if o := s.order(now); slices.Contains(o, "b:1") {
		t.Errorf("Order = %v: b:1 lost its down time", o)
	}
	if s.update([]string{"b:1", "d:1"}) {
		t.Error("Update of the same list reported a change")
	}
	if !s.update(nil) || !slices.Equal(s.addresses(), []string{"c:1"}) {
		t.Errorf("Update(nil): %v, want the configured server alone", s.addresses())
	}
}
