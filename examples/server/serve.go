package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/prom"
	"github.com/nodepass/nodepass/verify"
)

// serve runs the HTTPS server over store until ctx ends, then shuts it down
// gracefully and closes the Verifier. It does not close store.
func serve(ctx context.Context, cfg config, store verify.Store, log *slog.Logger, stdout io.Writer) error {
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
		Params:        verify.Params{LogN: cfg.logN, R: 8, P: 1, KeyLen: 64, SaltLen: 8},
		MaxConcurrent: cfg.concurrent,
		Observer:      metrics,
	}
	if cfg.failOpen {
		opts.FailOpen = &verify.FailOpen{OnDeferred: func(node string, err error) {
			if err != nil {
				log.Warn("node let in while its password hash could not be stored; it never was", "node", node, "err", err)
				return
			}
			log.Info("node let in while its password hash could not be stored; now stored", "node", node)
		}}
	}
	v, err := verify.New(store, opts)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer v.Close()
	if err := metrics.Attach(v); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	auth, err := httpauth.New(v, &httpauth.Options{Program: cfg.program, Logger: log})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	ca, err := newAuthority(fmt.Sprintf("nodepass-example-ca@%d", time.Now().Unix()), time.Now)
	if err != nil {
		return err
	}
	if cfg.caFile != "" {
		if err := os.WriteFile(cfg.caFile, ca.pem, 0o644); err != nil {
			return fmt.Errorf("server: -ca-file: %w", err)
		}
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	defer ln.Close()
	cert, err := ca.tlsCertificate(serverLeaf(ln.Addr(), cfg.tlsSANs))
	if err != nil {
		return err
	}

	ipHeader := strings.ToUpper(cfg.program[:1]) + cfg.program[1:] + "-Node-Ip"
	prefix := "/v1-" + cfg.program
	mux := http.NewServeMux()
	// Current agents POST a certificate signing request; older ones GET
	// a certificate and its key.
	for _, route := range []struct {
		name     string
		makeLeaf func(string, []net.IP) leaf
	}{{"serving-kubelet.crt", servingLeaf}, {"client-kubelet.crt", clientLeaf}} {
		h := auth.HandlerFunc(kubeletCert(ca, log, ipHeader, route.makeLeaf))
		mux.Handle("GET "+prefix+"/"+route.name, h)
		mux.Handle("POST "+prefix+"/"+route.name, h)
	}
	mux.HandleFunc("GET /cacerts", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(ca.pem)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	srv := &http.Server{
		Handler:           httpauth.ArrivalHandler(mux), // dates each request: MaxWait counts the TLS handshake
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnContext:       httpauth.ConnContext,
	}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	log.Info("server: ready", "program", cfg.program, "store", cfg.store, "logn", cfg.logN)
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

// kubeletCert answers a verified node's request for a kubelet certificate
// made by makeLeaf from its name and the addresses in its Node-Ip header:
// for a POST, a certificate for the public key of the request's CSR (see
// csrPublicKey), then the CA's; for a GET, as older agents send, a new
// key's certificate, the CA's and the key.
func kubeletCert(ca *authority, log *slog.Logger, ipHeader string, makeLeaf func(string, []net.IP) leaf) func(http.ResponseWriter, *http.Request, httpauth.Node) {
	return func(w http.ResponseWriter, r *http.Request, node httpauth.Node) {
		ips, err := parseIPs(node.IP)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", ipHeader, err), http.StatusBadRequest)
			return
		}
		l := makeLeaf(node.Name, ips)
		var pem []byte
		if r.Method == http.MethodPost {
			var pub crypto.PublicKey
			if pub, err = csrPublicKey(w, r, node.Name); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			pem, err = ca.issueFor(l, pub)
		} else {
			pem, err = ca.issue(l)
		}
		if err != nil {
			log.ErrorContext(r.Context(), "server: issuing a certificate", "node", node.Name, "err", err)
			http.Error(w, "internal error issuing the certificate", http.StatusInternalServerError)
			return
		}
		log.DebugContext(r.Context(), "server: certificate issued", "node", node.Name, "path", r.URL.Path, "ips", node.IP)
		w.Header().Set("Content-Type", "application/x-pem-file")
		w.Write(pem)
	}
}

// servingLeaf is the kubelet's serving certificate: the node's name as
// common name and DNS name, its addresses as IP SANs.
func servingLeaf(node string, ips []net.IP) leaf {
	return leaf{commonName: node, dnsNames: []string{node}, ips: ips, usage: x509.ExtKeyUsageServerAuth}
}

// clientLeaf is the kubelet's client certificate, in the form the
// Kubernetes Node authorizer expects.
func clientLeaf(node string, _ []net.IP) leaf {
	return leaf{commonName: "system:node:" + node, organization: []string{"system:nodes"}, usage: x509.ExtKeyUsageClientAuth}
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
