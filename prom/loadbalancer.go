package prom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepass/nodepass/agent/loadbalancer"
)

// LoadBalancerSource is what a LoadBalancerCollector reads at scrape
// time: a *loadbalancer.LoadBalancer.
type LoadBalancerSource interface {
	Stats() []loadbalancer.ServerStats
}

// LoadBalancerOptions configure a LoadBalancerCollector. A nil
// *LoadBalancerOptions means all defaults; a zero field means that
// field's default.
type LoadBalancerOptions struct {
	// Namespace prefixes every metric name. Default "nodepass".
	Namespace string
	// ConstLabels are added to every metric, e.g. {"name": "supervisor"}
	// and {"name": "apiserver"} for an agent's two load balancers on one
	// registry. Default none.
	ConstLabels prometheus.Labels
}

// LoadBalancerCollector is a prometheus.Collector over an agent's load
// balancer: one series per server (label "server", its address) of each
// figure of [loadbalancer.ServerStats], read at scrape time, so a removed
// server's series go with it. It is safe for concurrent use. Make one
// with NewLoadBalancerCollector; the zero value is not usable.
type LoadBalancerCollector struct {
	src   LoadBalancerSource
	state *prometheus.Desc
	stats []serverDesc
}

// serverDesc is one per-server metric read from ServerStats.
type serverDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(loadbalancer.ServerStats) float64
}

// lbStates are the values of the state label.
var lbStates = []loadbalancer.State{loadbalancer.StateUnchecked, loadbalancer.StateHealthy, loadbalancer.StateFailed}

// NewLoadBalancerCollector returns a Collector over src's Stats; register
// it with a prometheus.Registerer.
func NewLoadBalancerCollector(src LoadBalancerSource, opts *LoadBalancerOptions) (*LoadBalancerCollector, error) {
	if src == nil {
		return nil, errors.New("prom: NewLoadBalancerCollector(nil)")
	}
	var o LoadBalancerOptions
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = "nodepass"
	}
	name := func(n string) string { return prometheus.BuildFQName(o.Namespace, "loadbalancer", n) }
	c := &LoadBalancerCollector{
		src: src,
		state: prometheus.NewDesc(name("server_state"),
			"1 for the server's health state (unchecked, healthy, failed), 0 for the others.",
			[]string{"server", "state"}, o.ConstLabels),
	}
	stat := func(n, help string, kind prometheus.ValueType, value func(loadbalancer.ServerStats) float64) {
		c.stats = append(c.stats, serverDesc{
			desc:  prometheus.NewDesc(name(n), help, []string{"server"}, o.ConstLabels),
			kind:  kind,
			value: value,
		})
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	stat("server_standby", "1 when the server is the configured one and not in the list: it comes after the listed servers of its rank (healthy, suspect, unchecked).", gauge,
		func(s loadbalancer.ServerStats) float64 { return b2f(s.Standby) })
	stat("server_connections", "Connections proxied to the server now.", gauge,
		func(s loadbalancer.ServerStats) float64 { return float64(s.Active) })
	stat("server_connections_total", "Connections proxied to the server.", counter,
		func(s loadbalancer.ServerStats) float64 { return float64(s.Connections) })
	stat("server_dials_total", "Dials of proxied connections to the server.", counter,
		func(s loadbalancer.ServerStats) float64 { return float64(s.Dials) })
	stat("server_dial_failures_total", "Dials to the server that failed or timed out; the connection went to the next server.", counter,
		func(s loadbalancer.ServerStats) float64 { return float64(s.DialFailures) })
	stat("server_probes_total", "Health probes of the server.", counter,
		func(s loadbalancer.ServerStats) float64 { return float64(s.Probes) })
	stat("server_probe_failures_total", "Health probes of the server that failed: no connection, no TLS, no answer in time, or not 2xx.", counter,
		func(s loadbalancer.ServerStats) float64 { return float64(s.ProbeFailures) })
	return c, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Describe implements prometheus.Collector.
func (c *LoadBalancerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	for _, s := range c.stats {
		ch <- s.desc
	}
}

// Collect implements prometheus.Collector. It reads Stats once per scrape.
func (c *LoadBalancerCollector) Collect(ch chan<- prometheus.Metric) {
	for _, srv := range c.src.Stats() {
		for _, st := range lbStates {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, b2f(srv.State == st), srv.Address, st.String())
		}
		for _, s := range c.stats {
			ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(srv), srv.Address)
		}
	}
}

var _ prometheus.Collector = (*LoadBalancerCollector)(nil)
