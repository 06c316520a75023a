// Package prom exports a [verify.Verifier]'s figures as Prometheus
// metrics. It is its own module, so that the core module never makes its
// users build client_golang; a server that does not want Prometheus does not
// import it.
//
// The counters are read from [verify.Verifier.Stats] at scrape time, so
// nothing is counted twice; the two histograms are fed by the Verifier
// through [verify.Observer] as the work happens. That makes the wiring two
// steps, because the Observer must be in [verify.Options] before
// [verify.New] and the counters need the Verifier New returns:
//
//	m, err := prom.New(nil)                                  // 1. the Collector,
//	v, err := verify.New(store, &verify.Options{Observer: m}) //    as the Observer
//	err = m.Attach(v)                                        // 2. the Verifier, for its Stats
//	prometheus.MustRegister(m)
//
// Until Attach, a scrape has only the histograms.
//
// Metrics (the prefix is Options.Namespace, "nodepass" by default): one
// per field of [verify.Stats], named and described by its stat and help
// tags (a counter when the name ends in _total, a gauge otherwise), and
//
//	nodepass_scrypt_seconds            histogram  duration of one scrypt computation
//	nodepass_queue_wait_seconds        histogram  wait of a computation for its scrypt slot
//
// and, from a LoadBalancerCollector over an agent's load balancer
// (agent/loadbalancer), one series per server (label server):
//
//	nodepass_loadbalancer_server_state{state}        gauge    1 for the server's state (unchecked, healthy, failed), 0 for the others
//	nodepass_loadbalancer_server_standby             gauge    1 for the configured server while not in the list (used only when no listed one is usable)
//	nodepass_loadbalancer_server_connections         gauge    connections proxied to the server now
//	nodepass_loadbalancer_server_connections_total   counter  connections proxied to the server
//	nodepass_loadbalancer_server_dials_total         counter  dials of proxied connections to the server
//	nodepass_loadbalancer_server_dial_failures_total counter  of those, dials that failed or timed out (the connection went to the next server)
//	nodepass_loadbalancer_server_probes_total        counter  health probes of the server
//	nodepass_loadbalancer_server_probe_failures_total counter of those, probes that failed
package prom

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodepass/nodepass/verify"
)

// Source is what a Collector reads its counters and gauges from at scrape
// time: a *verify.Verifier.
type Source interface {
	Stats() verify.Stats
}

// DefaultScryptBuckets suit scrypt at k3s's parameters (about 0.1 s of one
// core, longer when cores are shared) and the small ones tests use.
var DefaultScryptBuckets = []float64{.001, .005, .01, .025, .05, .075, .1, .15, .25, .5, 1, 2.5}

// DefaultQueueWaitBuckets span an idle server to a herd: a request waits
// at most verify.Options.MaxWait (9.5 s by default), but the work it queued
// may wait longer and still finish for the retry.
var DefaultQueueWaitBuckets = []float64{.001, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// Options configure a Collector. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// Namespace prefixes every metric name. Default "nodepass".
	Namespace string
	// ConstLabels are added to every metric, e.g. to tell apart two
	// Verifiers registered with one registry. Default none.
	ConstLabels prometheus.Labels
	// ScryptBuckets are the upper bounds of nodepass_scrypt_seconds, in
	// increasing order. Default DefaultScryptBuckets.
	ScryptBuckets []float64
	// QueueWaitBuckets are the upper bounds of nodepass_queue_wait_seconds,
	// in increasing order. Default DefaultQueueWaitBuckets.
	QueueWaitBuckets []float64
}

// Collector is a prometheus.Collector over one Verifier and the
// verify.Observer that feeds its histograms. It is safe for concurrent
// use. Make one with New; the zero value is not usable.
type Collector struct {
	src       atomic.Pointer[Source]
	scrypt    prometheus.Histogram
	queueWait prometheus.Histogram
	stats     []statDesc
}

// statDesc is one metric read from Stats: its field's.
type statDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	field int
}

// New returns a Collector. Pass it as verify.Options.Observer, then Attach
// the Verifier and register the Collector.
func New(opts *Options) (*Collector, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Namespace == "" {
		o.Namespace = "nodepass"
	}
	if o.ScryptBuckets == nil {
		o.ScryptBuckets = DefaultScryptBuckets
	}
	if o.QueueWaitBuckets == nil {
		o.QueueWaitBuckets = DefaultQueueWaitBuckets
	}
	for name, b := range map[string][]float64{"ScryptBuckets": o.ScryptBuckets, "QueueWaitBuckets": o.QueueWaitBuckets} {
		if err := checkBuckets(b); err != nil {
			return nil, fmt.Errorf("prom: Options.%s: %w", name, err)
		}
	}

	c := &Collector{
		scrypt: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace:   o.Namespace,
			Name:        "scrypt_seconds",
			Help:        "Duration of one scrypt computation (a verification or an enrollment).",
			ConstLabels: o.ConstLabels,
			Buckets:     o.ScryptBuckets,
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace:   o.Namespace,
			Name:        "queue_wait_seconds",
			Help:        "Time a scrypt computation waited for a slot.",
			ConstLabels: o.ConstLabels,
			Buckets:     o.QueueWaitBuckets,
		}),
	}
	t := reflect.TypeFor[verify.Stats]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, kind := f.Tag.Get("stat"), prometheus.GaugeValue
		if strings.HasSuffix(name, "_total") {
			kind = prometheus.CounterValue
		}
		c.stats = append(c.stats, statDesc{
			desc:  prometheus.NewDesc(prometheus.BuildFQName(o.Namespace, "", name), f.Tag.Get("help"), nil, o.ConstLabels),
			kind:  kind,
			field: i,
		})
	}
	return c, nil
}

func checkBuckets(b []float64) error {
	if len(b) == 0 {
		return errors.New("no buckets")
	}
	for i := 1; i < len(b); i++ {
		if !(b[i] > b[i-1]) {
			return fmt.Errorf("bucket %d (%g) is not above bucket %d (%g)", i, b[i], i-1, b[i-1])
		}
	}
	return nil
}

// Attach sets the Verifier (or other Source) whose Stats the Collector
// exports. It can be called once; a second call or a nil src is an error.
func (c *Collector) Attach(src Source) error {
	if src == nil {
		return errors.New("prom: Attach(nil)")
	}
	if !c.src.CompareAndSwap(nil, &src) {
		return errors.New("prom: Collector already attached")
	}
	return nil
}

// ObserveScrypt implements verify.Observer: it feeds
// nodepass_scrypt_seconds.
func (c *Collector) ObserveScrypt(_ context.Context, d time.Duration) { c.scrypt.Observe(d.Seconds()) }

// ObserveQueueWait implements verify.Observer: it feeds
// nodepass_queue_wait_seconds.
func (c *Collector) ObserveQueueWait(_ context.Context, d time.Duration) {
	c.queueWait.Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.stats {
		ch <- s.desc
	}
	c.scrypt.Describe(ch)
	c.queueWait.Describe(ch)
}

// Collect implements prometheus.Collector. It reads the Source's Stats
// once per scrape, so the counters of one scrape are consistent with each
// other as far as Stats is.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if src := c.src.Load(); src != nil {
		st := reflect.ValueOf((*src).Stats())
		for _, s := range c.stats {
			ch <- prometheus.MustNewConstMetric(s.desc, s.kind, float64(st.Field(s.field).Uint()))
		}
	}
	c.scrypt.Collect(ch)
	c.queueWait.Collect(ch)
}

var (
	_ prometheus.Collector = (*Collector)(nil)
	_ verify.Observer      = (*Collector)(nil)
)
