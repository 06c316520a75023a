package agent

import (
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
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The servers the tests run on 127.0.0.1: a fake k3s supervisor over
// HTTPS and HTTP/2 with its own CAs, and servers that fail in the ways
// an agent meets.

// testCA is a certificate authority for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// leaf is a certificate the CA signs.
type leaf struct {
	cn, dns   string
	org       []string
	usage     x509.ExtKeyUsage
	notBefore time.Time
	notAfter  time.Time
	ips       []net.IP
}

// issue signs l for pub and returns the chain PEM: the certificate, then
// the CA's.
func (ca *testCA) issue(t testing.TB, l leaf, pub crypto.PublicKey) []byte {
	t.Helper()
	if l.notBefore.IsZero() {
		l.notBefore = time.Now().Add(-time.Minute)
	}
	if l.notAfter.IsZero() {
		l.notAfter = l.notBefore.Add(365 * 24 * time.Hour)
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
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.pem...)
}

// issueCA signs tmpl, a CA certificate for sub's key, and returns it PEM.
func (ca *testCA) issueCA(t testing.TB, tmpl *x509.Certificate, sub *testCA) []byte {
	t.Helper()
	tmpl.SerialNumber = big.NewInt(2)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, sub.key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// serverCert is a TLS certificate for 127.0.0.1 signed by ca.
func (ca *testCA) serverCert(t testing.TB) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	chain := ca.issue(t, leaf{cn: "supervisor", dns: "localhost", usage: x509.ExtKeyUsageServerAuth,
		ips: []net.IP{net.IPv4(127, 0, 0, 1)}}, key.Public())
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
	serverCA  *testCA
	secret    string
	mu        sync.Mutex
	clientCA  *testCA           // guarded by mu: a test may rotate it
	passwords map[string]string // node → password, shared by its servers; guarded by mu
}

func (cl *cluster) server() *testCA { return cl.serverCA }

func (cl *cluster) client() *testCA {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.clientCA
}

func newCluster(t testing.TB) *cluster {
	return &cluster{serverCA: newTestCA(t, "server-ca"), clientCA: newTestCA(t, "client-ca"),
		secret: "s3cret", passwords: make(map[string]string)}
}

// token is the cluster's full join token.
func (cl *cluster) token() string {
	sum := sha256.Sum256(cl.serverCA.pem)
	return "K10" + hex.EncodeToString(sum[:]) + "::server:" + cl.secret
}

// supervisor is a fake k3s supervisor: the routes an agent asks for,
// each request counted.
type supervisor struct {
	cl       *cluster
	srv      *httptest.Server
	addr     string
	announce []string // what /v1-k3s/apiservers answers; nil: 404
	// override, if set, answers a request instead of the routes when it
	// returns true.
	override func(w http.ResponseWriter, r *http.Request) bool
	// validity, if set, is the validity of the certificates issued;
	// default a year from a minute ago.
	validity func() (notBefore, notAfter time.Time)

	mu    sync.Mutex
	hits  map[string]int // "POST /v1-k3s/client-kubelet.crt" → count
	conns atomic.Int32   // TLS connections accepted
	http1 atomic.Int32   // requests that came over HTTP/1
}

func newSupervisor(t testing.TB, cl *cluster) *supervisor {
	t.Helper()
	s := &supervisor{cl: cl, hits: make(map[string]int)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /cacerts", func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.serverCA.pem) })
	mux.HandleFunc("GET /v1-k3s/config", s.authed(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"clusterDomain":"cluster.local"}`))
	}))
	mux.HandleFunc("GET /v1-k3s/client-ca.crt", s.authed(func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.client().pem) }))
	mux.HandleFunc("GET /v1-k3s/server-ca.crt", s.authed(func(w http.ResponseWriter, _ *http.Request) { w.Write(cl.serverCA.pem) }))
	mux.HandleFunc("GET /v1-k3s/apiservers", s.authed(func(w http.ResponseWriter, _ *http.Request) {
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
		{"serving-kubelet", true, cl.server, func(n string) leaf { return leaf{cn: n, dns: n, usage: x509.ExtKeyUsageServerAuth} }},
		{"client-kubelet", true, cl.client, func(n string) leaf {
			return leaf{cn: "system:node:" + n, org: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth}
		}},
		{"client-kube-proxy", false, cl.client, func(string) leaf { return leaf{cn: "system:kube-proxy", usage: x509.ExtKeyUsageClientAuth} }},
		{"client-k3s-controller", false, cl.client, func(string) leaf {
			return leaf{cn: "system:k3s-controller", usage: x509.ExtKeyUsageClientAuth}
		}},
	} {
		mux.HandleFunc("POST /v1-k3s/"+route.name+".crt", s.authed(func(w http.ResponseWriter, r *http.Request) {
			node := r.Header.Get("K3s-Node-Name")
			if route.node && !s.checkPassword(node, r.Header.Get("K3s-Node-Password")) {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			body, _ := io.ReadAll(r.Body)
			csr, err := x509.ParseCertificateRequest(body)
			if err != nil || csr.CheckSignature() != nil {
				http.Error(w, "bad CSR", http.StatusBadRequest)
				return
			}
			l := route.leaf(node)
			if s.validity != nil {
				l.notBefore, l.notAfter = s.validity()
			}
			w.Write(route.ca().issue(t, l, csr.PublicKey))
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
	s.srv.EnableHTTP2 = true
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cl.serverCA.serverCert(t)}}
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

// authed wraps h in the basic auth check of the join token.
func (s *supervisor) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "node" || p != s.cl.secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
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
	return s.count("POST /v1-k3s/serving-kubelet.crt") + s.count("POST /v1-k3s/client-kubelet.crt")
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
