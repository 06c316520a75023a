package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/agent/loadbalancer"
)

// PolicyNodepass names the agent that is this module's agent.Client
// (ClientPolicy), as ParsePolicy accepts it.
const PolicyNodepass = "nodepass"

// ClientPolicy makes each agent this module's agent.Client instead of a
// k3s agent: it runs the Client's own attempts (the configuration, the
// servers announced, both CA files, and only the certificates not valid
// on disk, over one kept-alive HTTP/2 connection per server), its own
// failover past a server that fails or does not answer within
// agent.DefaultHeaderTimeout, and its own backoff (agent.Backoff), every
// duration scaled by Scenario.TimeScale. It needs ModeHTTP. With
// ViaLoadBalancer, each agent dials its servers through a local
// loadbalancer.LoadBalancer of its own, as a k3s agent's supervisor
// requests go through its load balancer.
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

// dur scales d by the scenario's time scale.
func (p ClientPolicy) dur(d time.Duration) time.Duration {
	if p.scale == 0 {
		return d
	}
	return scaleDur(d, p.scale)
}

// clientAgents is what a run of ClientPolicy agents shares: the servers'
// addresses and CA, and a directory under which each agent keeps its
// files.
type clientAgents struct {
	hosts []string // host:port of each server
	ca    []byte   // the servers' CA, PEM
	token string   // the join token, K10<CA hash>::node:<password>
	dir   string   // each agent's data directory is dir/<i>
}

// newClientAgents prepares the data directories of a run's Client agents
// against the servers at urls with CA caPEM, on tmpfs where there is one
// (the Client fsyncs every file it writes, which on a disk would time the
// disk). With certs (Scenario.ValidCerts), each agent starts with the
// certificates an earlier join left: signed by the CA whose key caKey is
// (PEM), valid for a day.
func newClientAgents(urls []string, caPEM, caKey []byte, token string, nodes []Node, certs bool) (*clientAgents, error) {
	c := &clientAgents{ca: caPEM}
	for _, u := range urls {
		pu, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("bench: server URL %q: %w", u, err)
		}
		c.hosts = append(c.hosts, pu.Host)
	}
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
	if !certs {
		return c, nil
	}
	ca, err := parseCA(caPEM, caKey)
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

// prepareClients prepares r's ClientPolicy agents, if it has any, against
// the servers at urls (see newClientAgents).
func (r *run) prepareClients(urls []string, caPEM, caKey []byte) (err error) {
	if _, ok := r.policy.(ClientPolicy); !ok {
		return nil
	}
	r.clients, err = newClientAgents(urls, caPEM, caKey, r.token, r.nodes, r.sc.ValidCerts)
	return err
}

// configured is agent i's configured server: a healthy one (the hung
// servers are the first sc.Hung), in turn.
func (c *clientAgents) configured(sc Scenario, i int) int {
	return sc.Hung + i%(sc.Servers-sc.Hung)
}

// clientAgent is node i's agent as an agent.Client: it gets its four
// certificates, and counts what it sent in r's tally.
func (r *run) clientAgent(ctx context.Context, i int, p ClientPolicy, c *clientAgents) asked {
	sc := r.sc
	server := c.configured(sc, i)
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
			Probe: loadbalancer.ProbeOptions{TLS: &tls.Config{RootCAs: c.pool()},
				Interval: p.dur(time.Second), Timeout: p.dur(800 * time.Millisecond)}})
		if err != nil {
			r.tally.errs.Add(1)
			return asked{server: server}
		}
		defer lb.Close()
		opts.Server, opts.Servers = "https://"+lb.Addr(), nil
	}
	cl, err := agent.New(opts)
	if err != nil {
		r.tally.errs.Add(1)
		return asked{server: server}
	}
	defer cl.Close()
	_, err = cl.Get(ctx)
	st := cl.Stats()
	r.tally.attempts.Add(st.Attempts)
	r.tally.requests.Add(st.Requests)
	r.tally.handshakes.Add(st.Handshakes)
	r.failovers.Add(st.Failovers)
	r.certsRequested.Add(st.Requested)
	return asked{ok: err == nil, attempts: int(st.Attempts), last: time.Since(r.start), server: server}
}

// pool returns the servers' CA as a pool.
func (c *clientAgents) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(c.ca)
	return p
}

// signer is a CA whose key the agents' side has, to leave each agent the
// certificates of an earlier join.
type signer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func parseCA(certPEM, keyPEM []byte) (*signer, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("bench: no CA certificate and key for the agents' certificates")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("bench: CA: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("bench: CA key: %w", err)
	}
	return &signer{cert: cert, key: key, pem: certPEM}, nil
}

// earlierJoin writes to dir what a k3s agent's join leaves there: both CA
// files, and the four certificates with their keys, valid from an hour
// ago for a day (nowhere near their renewal).
func (s *signer) earlierJoin(dir, node string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	files := map[string][]byte{"client-ca.crt": s.pem, "server-ca.crt": s.pem}
	for _, c := range []struct {
		name string
		tmpl x509.Certificate
	}{
		{"serving-kubelet", x509.Certificate{Subject: pkix.Name{CommonName: node}, DNSNames: []string{node},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
		{"client-kubelet", x509.Certificate{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
		{"client-kube-proxy", x509.Certificate{Subject: pkix.Name{CommonName: proxyCN}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
		{"client-k3s-controller", x509.Certificate{Subject: pkix.Name{CommonName: controllerCN}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		now := time.Now()
		tmpl := c.tmpl
		tmpl.SerialNumber = serialNumber()
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(23*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, s.cert, key.Public(), s.key)
		if err != nil {
			return fmt.Errorf("bench: signing %s for %s: %w", c.name, node, err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		files[c.name+".crt"] = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), s.pem...)
		files[c.name+".key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

// serialNumber returns a random 128-bit certificate serial number.
func serialNumber() *big.Int {
	b := make([]byte, 16)
	rand.Read(b)
	b[0] &= 0x7f
	return new(big.Int).SetBytes(b)
}
