package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodepass/nodepass/agent/internal/statefile"
	"github.com/nodepass/nodepass/internal/k3stoken"
)

// Why the defaults are what they are:
//
//   - Backoff.Base 1 s: a transient failure costs an agent under a second.
//   - Backoff.Cap 15 s: a wait at the cap averages 7.5 s, as k3s's 5 to 10 s do.
//   - HeaderTimeout 5 s, half of k3s's client timeout. A server that
//     accepts and never answers costs an agent 5 s once per RecoveryDelay.
//     A node-password request to a server that has answered waits the
//     whole RequestTimeout, since the server may hold it while it
//     verifies the password.
//   - RequestTimeout 10 s, k3s's client timeout.
//   - RecoveryDelay 30 s, longer than a herd of 320 nodes takes to join
//     two servers (BENCHMARKS.md). A restarted server is used again
//     within half a minute.
//   - RenewAfter 0.7, the kubelet's window of 70 to 90 % of a lifetime.

// Defaults of Options.
const (
	DefaultHeaderTimeout  = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultRecoveryDelay  = 30 * time.Second
)

// Options configure a Client. A zero field means its default.
type Options struct {
	// Server is the configured server's URL, https://host:port, as k3s's
	// --server. Required. A URL without a port means port 443.
	Server string
	// Token is the join token, as k3s's --token. Required.
	Token string

	// NodeName is the node's name, lower-cased as k3s does. Default the
	// host name.
	NodeName string
	// NodeIP is the node's addresses, comma-separated. Default the
	// default routes' addresses, found at each attempt, as k3s finds them.
	NodeIP string
	// NodePassword is the node's password. Default NodePasswordFile's,
	// made as k3s makes it if missing.
	NodePassword string
	// NodePasswordFile defaults to k3s's, /etc/rancher/node/password.
	NodePasswordFile string
	// DataDir is the agent's data directory. Default /var/lib/rancher/<Program>.
	DataDir string
	// Program is "k3s" (the default) or "rke2", as routes and headers
	// name it.
	Program string

	// Servers, if not nil, replaces the state file's list of servers
	// (host:port, the port 1 to 65535) at start.
	Servers []string
	// StateFile keeps the servers known. Default k3s's,
	// DataDir/agent/etc/<Program>-agent-load-balancer.json.
	StateFile string

	// DialContext makes the connections to the servers, over which TLS
	// runs: through a proxy, say. Default a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// HeaderTimeout bounds the wait for an answer's headers before the
	// request moves on. Default 5 s.
	HeaderTimeout time.Duration
	// RequestTimeout bounds a request. Default 10 s.
	RequestTimeout time.Duration
	// RecoveryDelay is how long a server that failed is left out. Default 30 s.
	RecoveryDelay time.Duration
	Backoff       Backoff // spaces the attempts, a zero field taking its default
	// RenewAfter opens a certificate's renewal window (see CertRule.Check).
	// Default 0.7.
	RenewAfter float64
	// StopOnRejection makes Get return the sentinel errors at once.
	StopOnRejection bool
	Logger          *slog.Logger // default slog.Default()
}

// Sentinel errors of an attempt, for errors.Is. Asking again soon does
// not mend them: the next attempt waits the backoff's cap, or Get returns
// them at once with Options.StopOnRejection.
var (
	// ErrTokenRejected: the configured server answered 401, or a server
	// 403 to a request without the node's password.
	ErrTokenRejected = errors.New("agent: the server rejected the join token")
	// ErrCARejected: the configured server's CA does not have the token's
	// CA hash. The token is another cluster's, or the CA was replaced.
	ErrCARejected = errors.New("agent: the server's CA is not the one the token pins")
	// ErrNodePasswordRejected: a server answered 403 to the node's
	// password. It holds another password for this node.
	ErrNodePasswordRejected = errors.New("agent: node password rejected")
	// ErrRefused: a server answered another 4xx, such as 400 to a node name.
	ErrRefused = errors.New("agent: the server refused the request")
	// ErrNoRoute: a server answered 404, most likely as it runs another
	// program than Options.Program. It matches ErrRefused too.
	ErrNoRoute = errors.New("agent: the server has no such route")
)

// Client gets a node's certificates from its servers, one attempt at a
// time. Its methods may be called from any goroutine, and attempts never
// overlap. Make one with New.
type Client struct {
	// Fields set by New and never changed.
	opts     Options // defaults filled in
	tok      k3stoken.Token
	log      *slog.Logger
	servers  *rotation
	agentDir string
	certs    []certSpec
	prefix   string // "/v1-k3s"
	header   string // "K3s": the node headers' prefix
	// verifying makes connections checked against trust at the handshake;
	// presenting, the same presenting identity; bootstrapping, those for
	// /cacerts while trust is nil.
	verifying, presenting, bootstrapping *http.Transport
	sessions                             sync.Map // sessionKey → tls.ClientSessionCache

	mu            sync.Mutex             // held by an attempt; guards the fields below
	conns         map[string]*serverConn // by address
	trust         *trustedCA             // the servers' CA, nil until known
	trustFromDisk bool                   // trust was read from server-ca.crt, not fetched
	// caDoubted: a server's certificate did not chain to the CA read from
	// disk during this attempt. If the attempt fails, the next fetches
	// the CA again (diskCAStale).
	caDoubted, diskCAStale bool
	// identity is the node's client certificate, presented at this
	// attempt's handshakes (see clientCert); certless, the servers that
	// refused it in this attempt.
	identity     *tls.Certificate
	certless     map[string]bool
	warnedNoHash bool
	backoff      Backoff
	nodeServer   string          // the server that accepted the last node-password request
	failing      map[string]bool // servers whose last request failed (see logFailure)
	lastErr      string          // the last failed attempt's error (see retry)
	// supervisorPort replaces the port of the servers announced, when
	// the servers' configuration says their API servers listen on another
	// port than their supervisors (see readPorts).
	supervisorPort string
	// ips are the node's addresses, as the attempt sends them (see
	// addresses); routeIPs finds the default routes' (defaultRouteIPs).
	ips      []net.IP
	routeIPs func() []net.IP
	learnt   time.Time // when the servers were last asked for their list (see learn)
	prelude  *prelude  // what this Get or renewal has fetched; nil at its start
	last     *Result   // what Get returned, where Renew starts
	// askedUntil is the latest time a server of this attempt asked to be
	// left until (Retry-After, bounded by the backoff's cap): the floor
	// of the wait after a failed attempt.
	askedUntil time.Time

	stats    counters
	statsMu  sync.Mutex
	perSrv   map[string]uint64 // requests by address; guarded by statsMu
	password string            // set by New
}

// certSpec is one of the four certificates an agent holds.
type certSpec struct {
	name     string // file base name and route: "serving-kubelet"
	cn       string // the name it must carry
	usage    x509.ExtKeyUsage
	node     bool // its request carries the node headers (and costs the server scrypt)
	serverCA bool // chains to server-ca.crt, not client-ca.crt
	org      []string
	certFile string
	keyFile  string
	rule     CertRule // Roots filled in per check (Client.rule)
}

// New checks opts and returns a Client. It reads or makes the node
// password and reads the state file. It sends no request.
func New(opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	tok, err := k3stoken.Parse(o.Token)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	u, err := url.Parse(o.Server)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return nil, fmt.Errorf("agent: server %q is not an https://host:port URL", o.Server)
	}
	configured, err := statefile.HostPort(u)
	if err != nil {
		return nil, fmt.Errorf("agent: server %q: %w", o.Server, err)
	}
	c := &Client{
		opts:     o,
		tok:      tok,
		log:      o.Logger,
		agentDir: filepath.Join(o.DataDir, "agent"),
		prefix:   "/v1-" + o.Program,
		header:   strings.ToUpper(o.Program[:1]) + o.Program[1:],
		conns:    make(map[string]*serverConn),
		failing:  make(map[string]bool),
		certless: make(map[string]bool),
		routeIPs: defaultRouteIPs,
		backoff:  o.Backoff,
		perSrv:   make(map[string]uint64),
	}
	c.certs = c.certSpecs()
	if c.password, err = c.nodePassword(); err != nil {
		return nil, err
	}
	known := o.Servers
	switch s, err := statefile.Load(o.StateFile); {
	case err != nil:
		c.log.Warn("agent: ignoring the server list kept from an earlier run", "file", o.StateFile, "err", err)
	case s.For(configured):
		c.learnt = s.Saved
		if known == nil {
			known = s.Addresses
			if len(s.Dropped) > 0 {
				c.log.Warn("agent: ignoring addresses in the server list kept from an earlier run: not host:port with a port of 1 to 65535", "file", o.StateFile, "addresses", s.Dropped)
			}
		}
	case !s.Empty():
		c.log.Warn("agent: ignoring the server list kept from an earlier run: it is for another server", "file", o.StateFile, "server", s.Default)
	}
	c.servers = newRotation(configured, known)
	c.verifying, c.presenting, c.bootstrapping = c.transport(false, false), c.transport(false, true), c.transport(true, false)
	return c, nil
}

var programName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// fill checks o and fills in its defaults.
func (o *Options) fill() error {
	if o.Server == "" {
		return errors.New("agent: Options.Server is required")
	}
	if o.Program == "" {
		o.Program = "k3s"
	}
	if !programName.MatchString(o.Program) {
		return fmt.Errorf("agent: program %q is not a lower-case name", o.Program)
	}
	if o.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("agent: no node name given and no host name: %w", err)
		}
		o.NodeName = h
	}
	// k3s lower-cases the name on both sides (pkg/util/net.go
	// GetHostnameAndIPs; pkg/nodepassword/validate.go getNodeInfo): its
	// server signs for the lower-case name whatever the header says.
	o.NodeName = strings.ToLower(o.NodeName)
	if strings.ContainsAny(o.NodeName, " \t\r\n:/") {
		return fmt.Errorf("agent: node name %q is not a DNS name", o.NodeName)
	}
	for _, a := range o.Servers {
		if err := statefile.CheckAddress(a); err != nil {
			return fmt.Errorf("agent: server %w", err)
		}
	}
	for _, ip := range strings.Split(o.NodeIP, ",") {
		if ip = strings.TrimSpace(ip); ip != "" && net.ParseIP(ip) == nil {
			return fmt.Errorf("agent: node IP %q is not an IP address", ip)
		}
	}
	if o.DataDir == "" {
		o.DataDir = filepath.Join("/var/lib/rancher", o.Program)
	}
	if o.NodePasswordFile == "" {
		o.NodePasswordFile = "/etc/rancher/node/password"
	}
	if o.StateFile == "" {
		o.StateFile = filepath.Join(o.DataDir, "agent", "etc", o.Program+"-agent-load-balancer.json")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DialContext == nil {
		o.DialContext = new(net.Dialer).DialContext
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HeaderTimeout", &o.HeaderTimeout, DefaultHeaderTimeout},
		{"RequestTimeout", &o.RequestTimeout, DefaultRequestTimeout},
		{"RecoveryDelay", &o.RecoveryDelay, DefaultRecoveryDelay},
		{"Backoff.Base", &o.Backoff.Base, DefaultBackoffBase},
		{"Backoff.Cap", &o.Backoff.Cap, DefaultBackoffCap},
	} {
		if *d.v < 0 {
			return fmt.Errorf("agent: Options.%s is negative", d.name)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.HeaderTimeout > o.RequestTimeout {
		return fmt.Errorf("agent: HeaderTimeout %v is over RequestTimeout %v", o.HeaderTimeout, o.RequestTimeout)
	}
	if o.Backoff.Base > o.Backoff.Cap {
		return fmt.Errorf("agent: Backoff.Base %v is over Backoff.Cap %v", o.Backoff.Base, o.Backoff.Cap)
	}
	if o.RenewAfter == 0 {
		o.RenewAfter = DefaultRenewAfter
	}
	if o.RenewAfter <= 0 || o.RenewAfter >= 1 {
		return fmt.Errorf("agent: RenewAfter %v is not within (0, 1)", o.RenewAfter)
	}
	return nil
}

// certSpecs are the four certificates, in the order a k3s agent requests
// them, with their files under DataDir/agent.
func (c *Client) certSpecs() []certSpec {
	node := c.opts.NodeName
	specs := []certSpec{
		{name: "serving-kubelet", cn: node, usage: x509.ExtKeyUsageServerAuth, node: true, serverCA: true},
		{name: "client-kubelet", cn: "system:node:" + node, usage: x509.ExtKeyUsageClientAuth, node: true, org: []string{"system:nodes"}},
		{name: "client-kube-proxy", cn: "system:kube-proxy", usage: x509.ExtKeyUsageClientAuth},
		{name: "client-" + c.opts.Program + "-controller", cn: "system:" + c.opts.Program + "-controller", usage: x509.ExtKeyUsageClientAuth},
	}
	for i := range specs {
		s := &specs[i]
		s.certFile = filepath.Join(c.agentDir, s.name+".crt")
		s.keyFile = filepath.Join(c.agentDir, s.name+".key")
		s.rule = CertRule{Name: s.cn, Usage: s.usage, RenewAfter: c.opts.RenewAfter}
	}
	return specs
}

// nodePassword returns Options.NodePassword, or the password file's
// contents, making the file (as k3s does) when it does not exist.
func (c *Client) nodePassword() (string, error) {
	if c.opts.NodePassword != "" {
		return c.opts.NodePassword, nil
	}
	f := c.opts.NodePasswordFile
	b, err := os.ReadFile(f)
	if err == nil {
		if pw := strings.TrimSpace(string(b)); pw != "" {
			return pw, nil
		}
		return "", fmt.Errorf("agent: the node password: %w", &fs.PathError{Op: "read", Path: f, Err: errors.New("the file is empty")})
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("agent: reading the node password: %w", err)
	}
	raw := make([]byte, 16)
	rand.Read(raw) // never fails (crypto/rand)
	pw := hex.EncodeToString(raw)
	if err := statefile.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("agent: writing the node password: %w", err)
	}
	return pw, nil
}

// passwordSource names where the node password comes from, for errors.
func (c *Client) passwordSource() string {
	if c.opts.NodePassword != "" {
		return "Options.NodePassword"
	}
	return c.opts.NodePasswordFile
}

// Close closes the Client's connections once the attempt in progress, if
// any, has ended.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, sc := range c.conns {
		sc.cc.Close()
		delete(c.conns, addr)
	}
	return nil
}

// Servers returns the configured server's address (host:port) and every
// server the Client knows, the configured one included.
func (c *Client) Servers() (configured string, all []string) {
	return c.servers.configuredAddr(), c.servers.addresses()
}

// Stats counts what a Client has done.
type Stats struct {
	Attempts   uint64 // attempts started
	Requests   uint64 // HTTP requests sent, to every server
	Handshakes uint64 // TLS handshakes started
	Resumed    uint64 // handshakes that resumed a TLS session
	Failovers  uint64 // times a request moved on to the next server
	Requested  uint64 // certificates requested
	Issued     uint64 // certificates received and written
	Kept       uint64 // certificates found valid on disk and not requested
	// ServerRequests counts the requests sent to each server (host:port).
	ServerRequests map[string]uint64
}

type counters struct {
	attempts, requests, handshakes, resumed, failovers, requested, issued, kept atomic.Uint64
}

// Stats returns the Client's counts.
func (c *Client) Stats() Stats {
	s := Stats{
		Attempts:   c.stats.attempts.Load(),
		Requests:   c.stats.requests.Load(),
		Handshakes: c.stats.handshakes.Load(),
		Resumed:    c.stats.resumed.Load(),
		Failovers:  c.stats.failovers.Load(),
		Requested:  c.stats.requested.Load(),
		Issued:     c.stats.issued.Load(),
		Kept:       c.stats.kept.Load(),
	}
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	s.ServerRequests = make(map[string]uint64, len(c.perSrv))
	for a, n := range c.perSrv {
		s.ServerRequests[a] = n
	}
	return s
}

// sessionKey names a TLS session cache: one per server, since several
// servers may share a name (or, in tests, an address), and one for the
// sessions that presented the node's identity, which a server keeps
// with a session it resumes.
type sessionKey struct {
	addr     string
	identity bool
}

// tlsSessions returns the TLS session cache of addr's connections, with
// or without the node's identity.
func (c *Client) tlsSessions(addr string, identity bool) tls.ClientSessionCache {
	k := sessionKey{addr, identity}
	if v, ok := c.sessions.Load(k); ok {
		return v.(tls.ClientSessionCache)
	}
	v, _ := c.sessions.LoadOrStore(k, tls.NewLRUClientSessionCache(4))
	return v.(tls.ClientSessionCache)
}
