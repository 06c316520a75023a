package agent

import (
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testca"
)

// The servers the tests run on 127.0.0.1: a fake k3s supervisor over
// HTTPS and HTTP/2 with its own CAs, and servers that fail in the ways
// an agent meets.

// Dates as k3s sets them. Its CAs are valid for ten years from their
// creation (dynamiclistener cert/cert.go NewSelfSignedCACert); the tests'
// CAs are a few years old, as a cluster's are.
const (
	year  = 365 * 24 * time.Hour
	caAge = 3 * year
)

// testCA is a certificate authority for tests: a root, or an
// intermediate a root signed.
type testCA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte // its own certificate
	bundle []byte // its certificate, then its parent's bundle: what /cacerts sends
	root   *x509.Certificate
}

func newTestCA(t testing.TB, name string) *testCA {
	return newTestCAAt(t, name, time.Now().Add(-caAge), nil)
}

// newTestCAAt makes a CA created at created and valid ten years, signed
// by parent (nil: a self-signed root).
func newTestCAAt(t testing.TB, name string, created time.Time, parent *testCA) *testCA {
	t.Helper()
	var p *testca.CA
	if parent != nil {
		p = &testca.CA{Cert: parent.cert, Key: parent.key}
	}
	return fromTestca(testca.New(t, name, created, p), parent)
}

// fromTestca is c, whose parent is parent (nil: none), as a testCA.
func fromTestca(c *testca.CA, parent *testCA) *testCA {
	ca := &testCA{cert: c.Cert, key: c.Key, pem: c.PEM(), root: c.Cert}
	ca.bundle = ca.pem
	if parent != nil {
		ca.bundle = append(slices.Clip(ca.pem), parent.bundle...)
		ca.root = parent.root
	}
	return ca
}

// issueRule is how a k3s server dates the certificates it signs for its
// agents: k3s pkg/server/handlers/handlers.go signs them with
// dynamiclistener's cert/cert.go NewSignedCert.
type issueRule int

const (
	// ruleToday: NotBefore max(now - 1 h, the CA's NotBefore)
	// (dynamiclistener cert/validity.go CalculateNotBefore), NotAfter a
	// year after it.
	ruleToday issueRule = iota
	// ruleOlder: before dynamiclistener 3e35acf (October 2025), NotBefore
	// the CA's NotBefore and NotAfter a year from issue, as in the
	// incident's RKE2 v1.25 log.
	ruleOlder
)

func (r issueRule) String() string { return [...]string{"today", "older"}[r] }

// validity is the NotBefore and NotAfter a certificate ca signs at now
// gets.
func (r issueRule) validity(ca *x509.Certificate, now time.Time) (notBefore, notAfter time.Time) {
	if r == ruleOlder {
		return ca.NotBefore, now.Add(year)
	}
	notBefore = now.Add(-time.Hour)
	if notBefore.Before(ca.NotBefore) {
		notBefore = ca.NotBefore
	}
	return notBefore, notBefore.Add(year)
}

// leaf is a certificate the CA signs.
type leaf struct {
	cn, dns   string
	org       []string
	usage     x509.ExtKeyUsage
	notBefore time.Time // zero: as today's k3s (ruleToday)
	notAfter  time.Time
	ips       []net.IP
}

// issue signs l for pub and returns the chain PEM: the certificate, then
// the CA's bundle, as k3s sends it (handlers.go: the certificate and the
// CA certificates).
func (ca *testCA) issue(t testing.TB, l leaf, pub crypto.PublicKey) []byte {
	t.Helper()
	if l.notBefore.IsZero() {
		l.notBefore, l.notAfter = ruleToday.validity(ca.cert, time.Now())
	}
	if l.notAfter.IsZero() {
		l.notAfter = l.notBefore.Add(year)
	}
	var serial [16]byte
	rand.Read(serial[:])
	tmpl := &x509.Certificate{
		SerialNumber: new(big.Int).SetBytes(serial[:]),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.org},
		NotBefore:    l.notBefore,
		NotAfter:     l.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{l.usage},
		IPAddresses:  l.ips,
	}
	if l.dns != "" {
		tmpl.DNSNames = []string{l.dns}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.bundle...)
}

// serverCert is a TLS certificate for 127.0.0.1, 127.0.0.2 and localhost
// signed by ca.
func (ca *testCA) serverCert(t testing.TB) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	chain := ca.issue(t, leaf{cn: "supervisor", dns: "localhost", usage: x509.ExtKeyUsageServerAuth,
		ips: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(127, 0, 0, 2)}}, key.Public())
	cert, err := tls.X509KeyPair(chain, pemKey(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func pemKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

// cluster is the CAs and the token that servers of one test share.
type cluster struct {
	serverCA *testCA
	tlsCA    *testCA // signs the servers' TLS certificates; nil: serverCA
	// kubeletCA signs the serving certificates; nil: serverCA, as k3s
	// signs them (handlers.go ServingKubeletCert). examples/server signs
	// them with a kubelet CA of its own (serve.go routes).
	kubeletCA *testCA
	secret    string
	mu        sync.Mutex
	clientCA  *testCA           // guarded by mu: a test may rotate it
	passwords map[string]string // node → password, shared by its servers; guarded by mu
	deleted   map[string]bool   // nodes whose Node resource is gone; guarded by mu
}

func (cl *cluster) server() *testCA { return cl.serverCA }

func (cl *cluster) kubelet() *testCA { return cmp.Or(cl.kubeletCA, cl.serverCA) }

func (cl *cluster) client() *testCA {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.clientCA
}

func newCluster(t testing.TB) *cluster {
	return &cluster{serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca"),
		secret: "s3cret", passwords: make(map[string]string)}
}

// newChainCluster is a cluster with a custom CA chain, as k3s supports
// (k3s's contrib/util/generate-custom-ca-certs.sh): the server CA is an
// intermediate that a root signed, and /cacerts sends both.
func newChainCluster(t testing.TB) *cluster {
	cl := newCluster(t)
	root := newTestCAAt(t, "root-ca", time.Now().Add(-caAge), nil)
	cl.serverCA = newTestCAAt(t, "server-ca", time.Now().Add(-caAge), root)
	cl.clientCA = newTestCAAt(t, "client-ca", time.Now().Add(-caAge), root)
	return cl
}

// token is the cluster's full join token. Its CA hash is k3s's
// (pkg/clientaccess/token.go hashCA): the SHA-256 of the bundle's bytes
// for one certificate, of the root's DER for a chain.
func (cl *cluster) token() string {
	sum := sha256.Sum256(cl.serverCA.bundle)
	if cl.serverCA.root != cl.serverCA.cert {
		sum = sha256.Sum256(cl.serverCA.root.Raw)
	}
	return "K10" + hex.EncodeToString(sum[:]) + "::server:" + cl.secret
}

// supervisor is a fake k3s (or RKE2) supervisor: the routes an agent asks
// for, each request counted.
type supervisor struct {
	cl       *cluster
	srv      *httptest.Server
	addr     string
	program  string    // "k3s" or "rke2"
	rule     issueRule // how it dates the certificates it issues
	announce []string  // what /v1-<program>/apiservers answers; nil: 404
	// slowAPIServers makes /v1-<program>/apiservers answer [] after 5 s,
	// as k3s does when its datastore does not answer: its handler waits
	// out a 5 s context (k3s pkg/server/handlers/handlers.go APIServers).
	slowAPIServers atomic.Bool
	// httpsPort is the API server's port that /v1-<program>/config
	// announces beside the supervisor's: 0 for the supervisor's own (k3s),
	// another for RKE2 (6443 beside 9345).
	httpsPort int
	// override, if set, answers a request instead of the routes when it
	// returns true.
	override func(w http.ResponseWriter, r *http.Request) bool
	// validity, if set, is the validity of the certificates issued in
	// place of rule's.
	validity func() (notBefore, notAfter time.Time)
	// tamper, if set, changes each certificate before it is signed.
	tamper func(l *leaf)
	// clientSigner, if set, signs the client certificates in place of
	// the cluster's client CA (and is sent with them).
	clientSigner *testCA

	mu    sync.Mutex
	hits  map[string]int // "POST /v1-k3s/client-kubelet.crt" → count
	ips   []string       // the Node-Ip headers received
	users []string       // "METHOD path user" of each request authenticated
	conns atomic.Int32   // TLS connections accepted
	http1 atomic.Int32   // requests that came over HTTP/1
}

func newSupervisor(t testing.TB, cl *cluster) *supervisor {
	return startSupervisor(t, cl, "k3s", "127.0.0.1:0", 0)
}

// startSupervisor starts a supervisor of program listening on addr,
// whose /config announces httpsPort as the API server's (0: its own).
func startSupervisor(t testing.TB, cl *cluster, program, addr string, httpsPort int) *supervisor {
	t.Helper()
	s := &supervisor{cl: cl, program: program, hits: make(map[string]int), httpsPort: httpsPort}
	prefix := "/v1-" + program
	header := strings.ToUpper(program[:1]) + program[1:]
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cacerts", func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.serverCA.bundle) })
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
	mux.HandleFunc("GET "+prefix+"/config", s.authed(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, s.config()) }))
	mux.HandleFunc("GET "+prefix+"/client-ca.crt", s.authed(func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.client().bundle) }))
	mux.HandleFunc("GET "+prefix+"/server-ca.crt", s.authed(func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.serverCA.bundle) }))
	mux.HandleFunc("GET "+prefix+"/apiservers", s.authed(func(w http.ResponseWriter, r *http.Request) {
		if s.slowAPIServers.Load() {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
			io.WriteString(w, "[]")
			return
		}
		if s.announce == nil {
			http.NotFound(w, nil)
			return
		}
		json.NewEncoder(w).Encode(s.announce)
	}))
	for _, route := range []struct {
		name string
		node bool
		ca   func() *testCA
		leaf func(node string) leaf
	}{
		{"serving-kubelet", true, cl.kubelet, func(n string) leaf { return leaf{cn: n, dns: n, usage: x509.ExtKeyUsageServerAuth} }},
		{"client-kubelet", true, cl.client, func(n string) leaf {
			return leaf{cn: "system:node:" + n, org: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth}
		}},
		{"client-kube-proxy", false, cl.client, func(string) leaf { return leaf{cn: "system:kube-proxy", usage: x509.ExtKeyUsageClientAuth} }},
		{"client-" + program + "-controller", false, cl.client, func(string) leaf {
			return leaf{cn: "system:" + program + "-controller", usage: x509.ExtKeyUsageClientAuth}
		}},
	} {
		mux.HandleFunc("POST "+prefix+"/"+route.name+".crt", s.authed(func(w http.ResponseWriter, r *http.Request) {
			// k3s lower-cases the name it signs for (pkg/nodepassword/validate.go
			// getNodeInfo).
			node := strings.ToLower(r.Header.Get(header + "-Node-Name"))
			if route.node {
				s.mu.Lock()
				s.ips = append(s.ips, r.Header.Get(header+"-Node-Ip"))
				s.mu.Unlock()
				if !s.nodeAuth(w, r, node) {
					return
				}
				if !s.checkPassword(node, r.Header.Get(header+"-Node-Password")) {
					http.Error(w, "forbidden", http.StatusForbidden)
					return
				}
			}
			body, _ := io.ReadAll(r.Body)
			csr, err := x509.ParseCertificateRequest(body)
			if err != nil || csr.CheckSignature() != nil {
				http.Error(w, "bad CSR", http.StatusBadRequest)
				return
			}
			ca := route.ca()
			if s.clientSigner != nil && route.name != "serving-kubelet" {
				ca = s.clientSigner
			}
			l := route.leaf(node)
			if l.usage == x509.ExtKeyUsageServerAuth {
				// k3s: loopback, then the Node-Ip header's addresses
				// (handlers.go ServingKubeletCert).
				l.ips = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
				for _, v := range strings.Split(r.Header.Get(header+"-Node-Ip"), ",") {
					if ip := net.ParseIP(v); ip != nil {
						l.ips = append(l.ips, ip)
					}
				}
			}
			l.notBefore, l.notAfter = s.rule.validity(ca.cert, time.Now())
			if s.validity != nil {
				l.notBefore, l.notAfter = s.validity()
			}
			if s.tamper != nil {
				s.tamper(&l)
			}
			w.Write(ca.issue(t, l, csr.PublicKey))
		}))
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.Method+" "+r.URL.Path]++
		s.mu.Unlock()
		if r.ProtoMajor != 2 {
			s.http1.Add(1)
		}
		if s.override != nil && s.override(w, r) {
			return
		}
		mux.ServeHTTP(w, r)
	}))
	if addr != "127.0.0.1:0" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("cannot listen on %s: %v", addr, err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	s.srv.EnableHTTP2 = true
	// k3s's supervisor asks for a client certificate (pkg/cluster/https.go).
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cmp.Or(cl.tlsCA, cl.serverCA).serverCert(t)}, ClientAuth: tls.RequestClientCert}
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	s.addr = strings.TrimPrefix(s.srv.URL, "https://")
	return s
}

// config is the server's answer to /v1-<program>/config: a part of k3s's
// (pkg/server/handlers/handlers.go Config encodes its config.Control,
// whose SupervisorPort and HTTPSPort tell an RKE2 agent that the two
// differ).
func (s *supervisor) config() string {
	_, p, _ := net.SplitHostPort(s.addr)
	port, _ := strconv.Atoi(p)
	https := cmp.Or(s.httpsPort, port)
	return fmt.Sprintf(`{"clusterDomain":"cluster.local","SupervisorPort":%d,"HTTPSPort":%d}`, port, https)
}

// authUser is who a request authenticated as.
type authUser struct {
	name   string
	groups []string
}

type authKey struct{}

// authed wraps h in the supervisor's authentication, as k3s's: the union,
// in this order, of basic auth against its passwd file (the user "node",
// of the group k3s:agent), x509 client certificates against client-ca
// (pkg/authenticator/authenticator.go FromArgs; the user is the common
// name, the groups the organizations), and the API server's bootstrap
// tokens (pkg/daemons/control/server.go waitForAPIServerHandlers), then
// a role check (pkg/server/auth/auth.go doAuth,
// pkg/server/handlers/router.go). The first credential that passes
// decides. Credentials that all fail get 401; none at all, or a user of
// none of the groups k3s:agent, system:nodes and system:bootstrappers,
// get 403.
func (s *supervisor) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, err := s.authenticate(r)
		switch {
		case u == nil && err != nil:
			http.Error(w, "not authorized", http.StatusUnauthorized)
			return
		case u == nil || !slices.ContainsFunc(u.groups, func(g string) bool {
			return g == s.program+":agent" || g == "system:nodes" || g == "system:bootstrappers"
		}):
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		s.mu.Lock()
		s.users = append(s.users, r.Method+" "+r.URL.Path+" "+u.name)
		s.mu.Unlock()
		h(w, r.WithContext(context.WithValue(r.Context(), authKey{}, u)))
	}
}

// authenticate is the union authenticator of authed: the first
// credential that passes, or the errors of those that fail.
func (s *supervisor) authenticate(r *http.Request) (*authUser, error) {
	var errs []error
	if name, pw, ok := r.BasicAuth(); ok {
		if name == "node" && pw == s.cl.secret {
			return &authUser{name: "node", groups: []string{s.program + ":agent"}}, nil
		}
		errs = append(errs, errors.New("invalid username/password combination"))
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		certs := r.TLS.PeerCertificates
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		roots := x509.NewCertPool()
		roots.AddCert(s.cl.client().root)
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err == nil {
			return &authUser{name: certs[0].Subject.CommonName, groups: certs[0].Subject.Organization}, nil
		}
		errs = append(errs, err)
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if tok == bootstrapToken {
			id, _, _ := strings.Cut(tok, ".")
			return &authUser{name: "system:bootstrap:" + id, groups: []string{"system:bootstrappers"}}, nil
		}
		errs = append(errs, errors.New("invalid bootstrap token"))
	}
	return nil, errors.Join(errs...)
}

// bootstrapToken is the bootstrap token every supervisor accepts.
const bootstrapToken = "abcdef.0123456789abcdef"

// nodeAuth is k3s's check of a node-password request's identity
// (pkg/nodepassword/validate.go GetNodeAuthValidator): a request that
// authenticated as a node (system:node:<name>, of the group
// system:nodes) must name that node in its header (else 400), and the
// node must still exist (else 401: nodepassword.go verifyNode). It
// reports whether the request may go on.
func (s *supervisor) nodeAuth(w http.ResponseWriter, r *http.Request, node string) bool {
	u := r.Context().Value(authKey{}).(*authUser)
	name, isNode := strings.CutPrefix(u.name, "system:node:")
	if !isNode || !slices.Contains(u.groups, "system:nodes") {
		return true
	}
	if name != node {
		http.Error(w, "header node name does not match auth node name", http.StatusBadRequest)
		return false
	}
	s.cl.mu.Lock()
	deleted := s.cl.deleted[name]
	s.cl.mu.Unlock()
	if deleted {
		http.Error(w, "unable to verify node identity: node "+name+" not found", http.StatusUnauthorized)
		return false
	}
	return true
}

// usersOf is who each request for "METHOD path" authenticated as, in
// order.
func (s *supervisor) usersOf(route string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, u := range s.users {
		if rest, ok := strings.CutPrefix(u, route+" "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// checkPassword enrolls node with pw on its first request, and checks pw
// on later ones.
func (s *supervisor) checkPassword(node, pw string) bool {
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	if old, ok := s.cl.passwords[node]; ok {
		return old == pw
	}
	s.cl.passwords[node] = pw
	return true
}

// count returns the requests served for "METHOD path".
func (s *supervisor) count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[route]
}

// nodeRequests counts the requests that cost a server scrypt.
func (s *supervisor) nodeRequests() int {
	p := "POST /v1-" + s.program
	return s.count(p+"/serving-kubelet.crt") + s.count(p+"/client-kubelet.crt")
}

// total counts every request served.
func (s *supervisor) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.hits {
		n += v
	}
	return n
}

// apiServer is RKE2's API server beside its supervisor (6443 beside
// 9345): it refuses the agent's basic auth with 401, as kube-apiserver
// does. It returns its address and the count of requests it answered.
func apiServer(t testing.TB, cl *cluster, addr string) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cl.serverCA.serverCert(t)}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return ln.Addr().String(), &n
}

// hungServer completes TLS handshakes (offering protos by ALPN) and then
// never answers, as the incident's server did; with ca nil, it accepts
// TCP connections and never starts the handshake. It returns its address
// and the count of handshakes it completed.
func hungServer(t testing.TB, ca *testCA, protos ...string) (string, *atomic.Int32) {
	t.Helper()
	var ln net.Listener
	var err error
	if ca != nil {
		ln, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{ca.serverCert(t)}, NextProtos: protos})
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		t.Fatal(err)
	}
	var handshakes atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() == nil {
					handshakes.Add(1)
				}
				io.Copy(io.Discard, c) // reads what the client sends, answers nothing
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), &handshakes
}

// closingServer accepts connections and closes them at once.
func closingServer(t testing.TB) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String(), &accepted
}
