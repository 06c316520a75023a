package loadbalancer_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"

	"github.com/nodepass/nodepass/agent/loadbalancer"
)

// A load balancer in front of one server (a supervisor would be
// 10.0.0.1:9345 and more, given by Update): clients dial lb.Addr().
func Example() {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ping" {
			io.WriteString(w, "pong") // what the probes ask for
			return
		}
		io.WriteString(w, "hello from the server")
	}))
	defer srv.Close()
	client := srv.Client() // trusts the server's certificate
	serverCAs := client.Transport.(*http.Transport).TLSClientConfig.RootCAs

	lb, err := loadbalancer.New(&loadbalancer.Options{
		Default: srv.Listener.Addr().String(),
		Probe:   loadbalancer.ProbeOptions{TLS: &tls.Config{RootCAs: serverCAs}},
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer lb.Close()

	resp, err := client.Get("https://" + lb.Addr() + "/")
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	client.CloseIdleConnections()
	fmt.Println(string(body))
	fmt.Println("connections proxied:", lb.Stats()[0].Connections)
	// Output:
	// hello from the server
	// connections proxied: 1
}
