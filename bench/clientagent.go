package bench

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/agent/loadbalancer"
)

// ClientPolicy makes each agent this module's agent.Client instead of a
// k3s agent: its own attempts, failover and backoff, every duration
// scaled by Scenario.TimeScale. It needs ModeHTTP. With ViaLoadBalancer,
// each agent dials its servers through a loadbalancer.LoadBalancer of its
// own, as a k3s agent's supervisor requests go through its load balancer.
type ClientPolicy struct {
	ViaLoadBalancer bool
	scale           float64 // the scenario's TimeScale, set by scaled
}

// Delay is not used: the Client waits as agent.Backoff says. It returns
// agent.DefaultBackoffBase.
func (ClientPolicy) Delay(int, time.Duration, *mrand.Rand) time.Duration {
	return agent.DefaultBackoffBase
}

func (p ClientPolicy) String() string {
	if p.ViaLoadBalancer {
		return PolicyNodepass + "-lb"
	}
	return PolicyNodepass
}

func (ClientPolicy) validate() error         { return nil }
func (ClientPolicy) honoursRetryAfter() bool { return true }

func (p ClientPolicy) scaled(f float64) Policy {
	return ClientPolicy{ViaLoadBalancer: p.ViaLoadBalancer, scale: f}
}

func (p ClientPolicy) dur(d time.Duration) time.Duration { return scaleDur(d, cmp.Or(p.scale, 1)) }

// clientAgents is what a run of ClientPolicy agents shares: the servers'
// addresses and CA, and a directory under which each agent keeps its
// files.
type clientAgents struct {
	hosts []string       // host:port of each server
	pool  *x509.CertPool // the servers' CA
	token string         // the join token, K10<CA hash>::node:<password>
	dir   string         // each agent's data directory is dir/<i>
}

// newClientAgents prepares the data directories of a run's Client agents
// against the servers at urls with CA caPEM, on tmpfs where there is one
// (the Client fsyncs every file it writes, which on a disk would time the
// disk). With sc.ValidCerts, each agent starts with the certificates an
// earlier join left: signed now by the CA whose key caKey is (PEM), as
// the servers sign them (sc.CANotBefore).
func newClientAgents(sc Scenario, urls []string, caPEM, caKey []byte, token string, nodes []Node) (*clientAgents, error) {
	c := &clientAgents{pool: x509.NewCertPool(), hosts: hosts(urls)}
	c.pool.AppendCertsFromPEM(caPEM)
	sum := sha256.Sum256(caPEM)
	c.token = "K10" + hex.EncodeToString(sum[:]) + "::" + tokenUser + ":" + token
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	var err error
	if c.dir, err = os.MkdirTemp(base, "nodepass-bench-agents-"); err != nil {
		return nil, fmt.Errorf("bench: agents' data: %w", err)
	}
	if !sc.ValidCerts {
		return c, nil
	}
	var key *ecdsa.PrivateKey
	if b, _ := pem.Decode(caKey); b != nil {
		key, _ = x509.ParseECPrivateKey(b.Bytes)
	}
	ca, err := parseCA(caPEM, key, sc.CANotBefore)
	if err != nil {
		c.close()
		return nil, err
	}
	for i, n := range nodes {
		if err := ca.earlierJoin(filepath.Join(c.dir, fmt.Sprint(i), "agent"), n.Name); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// close removes the agents' files. A nil *clientAgents does nothing.
func (c *clientAgents) close() {
	if c != nil {
		os.RemoveAll(c.dir)
	}
}

// connect makes r's agents' clients, keys and certificate requests for
// the servers at ep, and prepares its ClientPolicy agents, if it has any
// (see newClientAgents).
func (r *run) connect(ctx context.Context, ep Endpoint) (err error) {
	if r.target, err = newHTTPAgents(ctx, ep.URLs, ep.CA, r.clientNames()); err != nil {
		return err
	}
	if _, ok := r.policy.(ClientPolicy); ok {
		r.clients, err = newClientAgents(r.sc, ep.URLs, ep.CA, ep.CAKey, r.token, r.nodes)
	}
	return err
}

// clientAgent is node i's agent as an agent.Client: it gets its four
// certificates, and counts what it sent in r's tally.
func (r *run) clientAgent(ctx context.Context, i int, p ClientPolicy, c *clientAgents) asked {
	sc := r.sc
	server := sc.Hung + i%(sc.Servers-sc.Hung) // its configured server, a healthy one
	known := c.hosts
	if sc.Known > 0 {
		known = c.hosts[:sc.Known]
	}
	dataDir := filepath.Join(c.dir, fmt.Sprint(i))
	opts := &agent.Options{
		Server:           "https://" + c.hosts[server],
		Token:            c.token,
		NodeName:         r.nodes[i].Name,
		NodeIP:           "127.0.0.1",
		NodePassword:     r.nodes[i].Password,
		NodePasswordFile: filepath.Join(dataDir, "password"),
		DataDir:          dataDir,
		Servers:          known,
		HeaderTimeout:    p.dur(agent.DefaultHeaderTimeout),
		RequestTimeout:   sc.scale(sc.ClientTimeout),
		RecoveryDelay:    p.dur(agent.DefaultRecoveryDelay),
		Backoff:          agent.Backoff{Base: p.dur(agent.DefaultBackoffBase), Cap: p.dur(agent.DefaultBackoffCap)},
		Logger:           slog.New(slog.DiscardHandler),
	}
	if p.ViaLoadBalancer {
		lb, err := loadbalancer.New(&loadbalancer.Options{Default: c.hosts[server], Servers: known,
			StateFile: filepath.Join(dataDir, "agent", "etc", "k3s-agent-load-balancer.json"), Logger: opts.Logger,
			Probe: loadbalancer.ProbeOptions{TLS: &tls.Config{RootCAs: c.pool},
				Interval: p.dur(time.Second), HealthyInterval: p.dur(10 * time.Second), Timeout: p.dur(800 * time.Millisecond)}})
		if err != nil {
			r.tally.errs.Add(1)
			return asked{Server: server}
		}
		defer lb.Close()
		opts.Server, opts.Servers = "https://"+lb.Addr(), nil
	}
	cl, err := agent.New(opts)
	if err != nil {
		r.tally.errs.Add(1)
		return asked{Server: server}
	}
	defer cl.Close()
	_, err = cl.Get(ctx)
	st := cl.Stats()
	r.tally.attempts.Add(st.Attempts)
	r.tally.requests.Add(st.Requests)
	r.tally.handshakes.Add(st.Handshakes)
	r.failovers.Add(st.Failovers)
	r.certsRequested.Add(st.Requested)
	return asked{ok: err == nil, Attempts: int(st.Attempts), Last: time.Since(r.start), Server: server}
}
