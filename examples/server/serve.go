package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/internal/atomicfile"
	"github.com/nodepass/nodepass/internal/logbudget"
	"github.com/nodepass/nodepass/prom"
	"github.com/nodepass/nodepass/verify"
)

// serve runs the HTTPS server over store until ctx ends, then shuts it down
// gracefully and closes the Verifier. It does not close store.
func serve(ctx context.Context, cfg config, store verify.DigestStore, log *slog.Logger, stdout io.Writer) error {
	// The metrics Collector is the Verifier's Observer (histograms) and
	// reads the Verifier's Stats at scrape time (counters).
	metrics, err := prom.New(nil)
	if err != nil {
		return err
	}
	digestKey, err := loadDigestKey(cfg.digestKey)
	if err != nil {
		return err
	}
	opts := &verify.Options{
		DigestKey:     digestKey,
		Params:        cfg.params(),
		MaxConcurrent: cfg.concurrent,
		Observer:      metrics,
	}
	if cfg.failOpen {
		opts.FailOpen = &verify.FailOpen{OnDeferred: func(node string, err error) {
			if err != nil {
				log.Warn("server: node let in while its password hash could not be stored; it never was", "node", logbudget.Clip(node), "err", logbudget.ClipError(err))
				return
			}
			log.Info("server: node let in while its password hash could not be stored; now stored", "node", logbudget.Clip(node))
		}}
	}
	audit := newAudit(log)
	v, err := verify.New(audit.watched(store), opts)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer v.Close()
	if err := metrics.Attach(v); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	authOpts := &httpauth.Options{Program: cfg.program, Logger: slog.New(warnAndAbove{log.Handler()})}
	if cfg.tokenFile != "" {
		if err := loadTokenFile(ctx, v, cfg.tokenFile, cfg.program); err != nil {
			return err
		}
		authOpts.Tokens = auditedVerifier{v, audit}
	}
	auth, err := httpauth.New(auditedVerifier{v, audit}, authOpts)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	cas, err := newAuthorities(cfg.dataDir, cfg.caOptions())
	if err != nil {
		return err
	}
	if cfg.caFile != "" {
		if err := atomicfile.WriteFile(cfg.caFile, cas.server.pem, 0o644); err != nil {
			return fmt.Errorf("server: -ca-file: %w", err)
		}
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer ln.Close()
	own := serverLeaf(ln.Addr(), cfg.tlsSANs)
	cert, err := cas.server.tlsCertificate(own)
	if err != nil {
		return err
	}
	mux := routes(cfg, cas, own, announce(cfg, ln.Addr().(*net.TCPAddr)), auth, audit, log)
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if cfg.tokenFile != "" {
		mux.Handle("GET /metrics", auth.TokenHandler(metricsHandler))
	} else {
		// Without join tokens there is no credential to ask for.
		log.Warn("server: no -token-file: /metrics is served without authentication")
		mux.Handle("GET /metrics", metricsHandler)
	}

	srv := &http.Server{
		Handler:           httpauth.ArrivalHandler(withRemote(mux)), // dates each request: MaxWait counts the TLS handshake
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext:       httpauth.ConnContext,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	logStore(cfg, log)
	log.Info("server: ready", "program", cfg.program, "store", cfg.store, "logn", cfg.logN, "ca-hash", cas.server.caHash())
	fmt.Fprintf(stdout, "listening on https://%s\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	log.Info("server: shutting down")
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.drain)
	defer cancel()
	if err := srv.Shutdown(drainCtx); err != nil {
		log.Warn("server: requests still in flight after -shutdown-timeout; closing", "err", err)
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("server: %w", err)
	}
	return nil
}

// announced is what a server tells agents of the cluster.
type announced struct {
	supervisorPort int      // where agents ask for certificates: this server's port
	apiserverPort  int      // the API servers' port: -apiserver-port
	apiservers     []string // the API servers' endpoints, /apiservers's answer
}

// announce returns what the server at addr tells agents. As k3s and RKE2
// do, /v1-<prog>/apiservers lists API server endpoints (k3s
// pkg/server/handlers/handlers.go APIServers: the kubernetes service's
// EndpointSlices and etcd's records of the API servers) at the API
// server's port, which is the supervisor's on k3s and 6443 beside a
// supervisor on 9345 on RKE2 (rancher/rke2 pkg/cli/defaults/defaults.go:
// SupervisorPort 9345, HTTPSPort 6443).
func announce(cfg config, addr *net.TCPAddr) announced {
	a := announced{supervisorPort: addr.Port, apiserverPort: cfg.apiserverPort, apiservers: cfg.apiservers}
	if a.apiserverPort == 0 {
		a.apiserverPort = a.supervisorPort
		if cfg.program == "rke2" {
			a.apiserverPort = rke2APIServerPort
		}
	}
	if len(a.apiservers) == 0 {
		a.apiservers = []string{net.JoinHostPort(addr.IP.String(), strconv.Itoa(a.apiserverPort))}
	}
	return a
}

// rke2APIServerPort is RKE2's API server port, apart from its
// supervisor's (9345).
const rke2APIServerPort = 6443

// noDatastoreWait is how long k3s takes to answer /apiservers when its
// datastore does not answer: the 5 s context of k3s
// pkg/server/handlers/handlers.go APIServers, which its address
// collector (getAddressCollector) waits out before it answers [].
const noDatastoreWait = 5 * time.Second

// apiserversHandler answers /v1-<prog>/apiservers with servers as JSON
// or, with noDatastore, as k3s does when its datastore does not answer:
// [] after noDatastoreWait, or nothing once the client has gone. (k3s
// also spins a core meanwhile; this does not.)
func apiserversHandler(servers []string, noDatastore bool) http.Handler {
	answer, _ := json.Marshal(servers)
	if noDatastore {
		answer = []byte("[]")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if noDatastore {
			t := time.NewTimer(noDatastoreWait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	})
}

// routes are a k3s supervisor's routes for its agents (pkg/server/handlers
// in k3s): /cacerts and /ping without authentication; the two kubelet
// certificates behind the node password (and the join token, with
// -token-file); and, with -token-file only, behind the token: the
// configuration, the CA files, the servers to use, and the kube-proxy's
// and controller's client certificates.
func routes(cfg config, cas *authorities, own leaf, a announced, auth *httpauth.Auth, audit *audit, log *slog.Logger) *http.ServeMux {
	prefix := "/v1-" + cfg.program
	ipHeader := strings.ToUpper(cfg.program[:1]) + cfg.program[1:] + "-Node-Ip"
	mux := http.NewServeMux()
	pemFile := func(b []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-pem-file")
			w.Write(b)
		}
	}
	mux.Handle("GET /cacerts", pemFile(cas.server.pem))
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "pong") })
	// Current agents POST a certificate signing request; older ones GET
	// a certificate and its key.
	k := kubeletIssuer{log: log, audit: audit, ipHeader: ipHeader, own: own}
	for _, route := range []struct {
		name string
		ca   *authority
		leaf func(string, []net.IP) leaf
	}{{"serving-kubelet.crt", cas.kubelet, servingLeaf}, {"client-kubelet.crt", cas.client, clientLeaf}} {
		h := auth.HandlerFunc(k.handler(route.ca, route.leaf))
		mux.Handle("GET "+prefix+"/"+route.name, h)
		mux.Handle("POST "+prefix+"/"+route.name, h)
	}
	if cfg.tokenFile == "" {
		log.Warn("server: no -token-file: agents' requests for the configuration, CA files, apiservers and component certificates are not served")
		return mux
	}
	mux.Handle("GET "+prefix+"/client-ca.crt", auth.TokenHandler(pemFile(cas.client.pem)))
	mux.Handle("GET "+prefix+"/server-ca.crt", auth.TokenHandler(pemFile(cas.server.pem)))
	// k3s's /config is its whole control configuration; agents read
	// these fields of it (k3s pkg/daemons/config/types.go Control).
	config, _ := json.Marshal(map[string]any{"SupervisorPort": a.supervisorPort, "HTTPSPort": a.apiserverPort, "Program": cfg.program})
	mux.Handle("GET "+prefix+"/config", auth.TokenHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(config)
	})))
	mux.Handle("GET "+prefix+"/apiservers", auth.TokenHandler(apiserversHandler(a.apiservers, cfg.noDatastore)))
	for name, cn := range map[string]string{"client-kube-proxy.crt": "system:kube-proxy", "client-" + cfg.program + "-controller.crt": "system:" + cfg.program + "-controller"} {
		mux.Handle("POST "+prefix+"/"+name, auth.TokenHandler(componentCert(cas.client, audit, log, cn)))
	}
	return mux
}

// kubeletIssuer answers verified nodes' requests for kubelet
// certificates.
type kubeletIssuer struct {
	log      *slog.Logger
	audit    *audit
	ipHeader string
	own      leaf // the server's own names and addresses, never signed for a node
}

// maxNodeIPs bounds the addresses of a kubelet's serving certificate:
// dual-stack nodes send two, a few more is generous.
const maxNodeIPs = 8

// handler answers a verified node's request for a kubelet certificate
// made by makeLeaf from its name and the addresses in its Node-Ip header
// and signed by ca: for a POST, a certificate for the public key of the
// request's CSR (see csrPublicKey), then the CA's; for a GET, as older
// agents send, a new key's certificate, the CA's and the key. It refuses
// names and addresses a node cannot have: a wildcard, the server's own
// names and addresses, loopback, unspecified and multicast addresses,
// and more than maxNodeIPs addresses; each refusal is answered 400 and
// logged (audit.refused). The first certificate of a node the request
// enrolled logs its enrollment (audit.issued).
func (k kubeletIssuer) handler(ca *authority, makeLeaf func(string, []net.IP) leaf) func(http.ResponseWriter, *http.Request, httpauth.Node) {
	return func(w http.ResponseWriter, r *http.Request, node httpauth.Node) {
		pem, err := k.issue(w, r, node, ca, makeLeaf)
		var refused badRequest
		switch {
		case errors.As(err, &refused):
			k.audit.refused(r.Context(), "node", node.Name, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case err != nil:
			k.log.ErrorContext(r.Context(), "server: issuing a certificate", "node", logbudget.Clip(node.Name), "err", err)
			http.Error(w, "internal error issuing the certificate", http.StatusInternalServerError)
			return
		}
		k.audit.issued(r.Context(), node.Name)
		k.log.DebugContext(r.Context(), "server: certificate issued", "node", logbudget.Clip(node.Name), "path", r.URL.Path, "ips", logbudget.Clip(node.IP))
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(pem)
	}
}

// issue makes the certificate handler answers with. An error that is
// the request's fault is a badRequest.
func (k kubeletIssuer) issue(w http.ResponseWriter, r *http.Request, node httpauth.Node, ca *authority, makeLeaf func(string, []net.IP) leaf) ([]byte, error) {
	ips, err := parseIPs(node.IP)
	if err != nil {
		return nil, badRequest{fmt.Errorf("%s: %w", k.ipHeader, err)}
	}
	if err := k.check(node.Name, ips); err != nil {
		return nil, badRequest{err}
	}
	l := makeLeaf(node.Name, ips)
	if r.Method != http.MethodPost {
		return ca.issue(l)
	}
	pub, err := csrPublicKey(w, r, l.csrNames)
	if err != nil {
		return nil, badRequest{err}
	}
	return ca.issueFor(l, pub)
}

// badRequest is an error that is the request's fault: answered 400, its
// message shown to the client.
type badRequest struct{ error }

func (e badRequest) Unwrap() error { return e.error }

// check refuses a node name or addresses no node may have a certificate
// for.
func (k kubeletIssuer) check(name string, ips []net.IP) error {
	if strings.Contains(name, "*") {
		return fmt.Errorf("node name %q is a wildcard", name)
	}
	for _, own := range k.own.dnsNames {
		if strings.EqualFold(name, own) {
			return fmt.Errorf("node name %q is a name of this server", name)
		}
	}
	if len(ips) > maxNodeIPs {
		return fmt.Errorf("%s: %d addresses, at most %d", k.ipHeader, len(ips), maxNodeIPs)
	}
	for _, ip := range ips {
		if ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() {
			return fmt.Errorf("%s: %s is not a node's address", k.ipHeader, ip)
		}
		for _, own := range k.own.ips {
			if ip.Equal(own) {
				return fmt.Errorf("%s: %s is an address of this server", k.ipHeader, ip)
			}
		}
	}
	return nil
}

// componentCert answers a request for a component's client certificate
// (the kube-proxy's, the controller's): the body is a CSR whose common
// name is cn; the answer, the certificate signed by ca, then the CA's.
// A refused CSR is answered 400 and logged (audit.refused).
func componentCert(ca *authority, audit *audit, log *slog.Logger, cn string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pub, err := csrPublicKey(w, r, []string{cn})
		if err != nil {
			user, _ := httpauth.TokenUser(r.Context())
			audit.refused(r.Context(), "user", user, err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		pem, err := ca.issueFor(leaf{commonName: cn, usage: x509.ExtKeyUsageClientAuth}, pub)
		if err != nil {
			log.ErrorContext(r.Context(), "server: issuing a certificate", "cn", cn, "err", err)
			http.Error(w, "internal error issuing the certificate", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(pem)
	}
}

// servingLeaf is the kubelet's serving certificate: the node's name as
// common name and DNS name, its addresses as IP SANs.
func servingLeaf(node string, ips []net.IP) leaf {
	return leaf{commonName: node, dnsNames: []string{node}, ips: ips, usage: x509.ExtKeyUsageServerAuth,
		csrNames: []string{node, "system:node:" + node}}
}

// clientLeaf is the kubelet's client certificate, in the form the
// Kubernetes Node authorizer expects.
func clientLeaf(node string, _ []net.IP) leaf {
	return leaf{commonName: "system:node:" + node, organization: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth,
		csrNames: []string{node, "system:node:" + node}}
}

// serverLeaf is the server's own certificate: loopback names, the address
// it listens on unless that is a wildcard, and the -tls-san entries.
func serverLeaf(addr net.Addr, sans []string) leaf {
	l := leaf{commonName: "nodepass-example-server", dnsNames: []string{"localhost"},
		ips: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, usage: x509.ExtKeyUsageServerAuth}
	if a, ok := addr.(*net.TCPAddr); ok && !a.IP.IsUnspecified() && !a.IP.IsLoopback() {
		l.ips = append(l.ips, a.IP)
	}
	for _, s := range sans {
		if ip := net.ParseIP(s); ip != nil {
			l.ips = append(l.ips, ip)
		} else {
			l.dnsNames = append(l.dnsNames, s)
		}
	}
	return l
}

// parseIPs parses a Node-Ip header: empty, or comma-separated addresses.
func parseIPs(h string) ([]net.IP, error) {
	var ips []net.IP
	for _, s := range strings.Split(h, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("%q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}
