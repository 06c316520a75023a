package prom

import (
	"crypto/tls"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodepass/nodepass/agent/loadbalancer"
)

type fixedServers []loadbalancer.ServerStats

func (f fixedServers) Stats() []loadbalancer.ServerStats { return f }

func TestLoadBalancerCollector(t *testing.T) {
	c, err := NewLoadBalancerCollector(fixedServers{
		{Address: "10.0.0.1:9345", State: loadbalancer.StateHealthy, Default: true, Standby: true, Active: 2, Connections: 3, Dials: 4, DialFailures: 1, Probes: 5, ProbeFailures: 0},
		{Address: "10.0.0.2:9345", State: loadbalancer.StateFailed, Active: 0, Connections: 7, Dials: 8, DialFailures: 2, Probes: 9, ProbeFailures: 6},
	}, &LoadBalancerOptions{ConstLabels: prometheus.Labels{"name": "supervisor"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP nodepass_loadbalancer_server_connections Connections proxied to the server now.
# TYPE nodepass_loadbalancer_server_connections gauge
nodepass_loadbalancer_server_connections{name="supervisor",server="10.0.0.1:9345"} 2
nodepass_loadbalancer_server_connections{name="supervisor",server="10.0.0.2:9345"} 0
# HELP nodepass_loadbalancer_server_dial_failures_total Dials to the server that failed or timed out; the connection went to the next server.
# TYPE nodepass_loadbalancer_server_dial_failures_total counter
nodepass_loadbalancer_server_dial_failures_total{name="supervisor",server="10.0.0.1:9345"} 1
nodepass_loadbalancer_server_dial_failures_total{name="supervisor",server="10.0.0.2:9345"} 2
# HELP nodepass_loadbalancer_server_probe_failures_total Health probes of the server that failed: no connection, no TLS, no answer in time, or not 2xx.
# TYPE nodepass_loadbalancer_server_probe_failures_total counter
nodepass_loadbalancer_server_probe_failures_total{name="supervisor",server="10.0.0.1:9345"} 0
nodepass_loadbalancer_server_probe_failures_total{name="supervisor",server="10.0.0.2:9345"} 6
# HELP nodepass_loadbalancer_server_standby 1 when the server is the configured one and not in the list: it comes after the listed servers of its rank (healthy, suspect, unchecked).
# TYPE nodepass_loadbalancer_server_standby gauge
nodepass_loadbalancer_server_standby{name="supervisor",server="10.0.0.1:9345"} 1
nodepass_loadbalancer_server_standby{name="supervisor",server="10.0.0.2:9345"} 0
# HELP nodepass_loadbalancer_server_state 1 for the server's health state (unchecked, healthy, failed), 0 for the others.
# TYPE nodepass_loadbalancer_server_state gauge
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.1:9345",state="failed"} 0
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.1:9345",state="healthy"} 1
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.1:9345",state="unchecked"} 0
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.2:9345",state="failed"} 1
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.2:9345",state="healthy"} 0
nodepass_loadbalancer_server_state{name="supervisor",server="10.0.0.2:9345",state="unchecked"} 0
`
	names := []string{
		"nodepass_loadbalancer_server_connections", "nodepass_loadbalancer_server_dial_failures_total",
		"nodepass_loadbalancer_server_probe_failures_total", "nodepass_loadbalancer_server_standby", "nodepass_loadbalancer_server_state",
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := make(map[string]float64)
	for _, f := range families {
		for _, m := range f.Metric {
			sums[f.GetName()] += m.GetCounter().GetValue()
		}
	}
	for name, v := range map[string]float64{
		"nodepass_loadbalancer_server_connections_total": 10,
		"nodepass_loadbalancer_server_dials_total":       12,
		"nodepass_loadbalancer_server_probes_total":      14,
	} {
		if sums[name] != v {
			t.Errorf("%s sums to %g, want %g", name, sums[name], v)
		}
	}
}

// Over a real load balancer the collector passes a pedantic registry's
// checks, and follows its servers.
func TestLoadBalancerCollectorLive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // refuses once closed
	ln.Close()
	lb, err := loadbalancer.New(&loadbalancer.Options{
		Default: addr,
		Probe:   loadbalancer.ProbeOptions{TLS: &tls.Config{InsecureSkipVerify: true}},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	c, err := NewLoadBalancerCollector(lb, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if n, err := testutil.GatherAndCount(reg, "nodepass_loadbalancer_server_state"); err != nil || n != 3 {
		t.Errorf("%d state series (%v), want 3 for one server", n, err)
	}
	if err := lb.Update([]string{addr, "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "nodepass_loadbalancer_server_connections"); err != nil || n != 2 {
		t.Errorf("%d connection series (%v), want 2 after Update", n, err)
	}
}

func TestNewLoadBalancerCollectorNil(t *testing.T) {
	if _, err := NewLoadBalancerCollector(nil, nil); err == nil {
		t.Error("NewLoadBalancerCollector(nil) succeeded")
	}
}
