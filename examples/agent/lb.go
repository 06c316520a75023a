package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/agent/loadbalancer"
)

// lbRefresh is how often the load balancer takes the servers the Client
// has learnt (from /v1-<program>/apiservers).
const lbRefresh = 10 * time.Second

// startLoadBalancer starts the node's load balancer on cfg.lbListen in
// front of the servers c knows, probing them with the servers' CA the
// Client trusts (res.ServerCA), and keeps its list the Client's until ctx
// ends. It returns a function that stops it.
func startLoadBalancer(ctx context.Context, cfg config, c *agent.Client, res *agent.Result, log *slog.Logger) (stop func(), err error) {
	if res.ServerCA == nil {
		return nil, errors.New("agent: the load balancer's CA: the servers' CA is not known")
	}
	configured, known := c.Servers() // configured is host:port, 443 when -server has no port
	lb, err := loadbalancer.New(&loadbalancer.Options{
		Listen:      cfg.lbListen,
		Default:     configured,
		Servers:     known,
		Probe:       loadbalancer.ProbeOptions{TLS: &tls.Config{RootCAs: res.ServerCA}},
		DialContext: cfg.opts.DialContext, // the proxy's, if any
		Logger:      log,
	})
	if err != nil {
		return nil, fmt.Errorf("agent: -lb-listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(lbRefresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, now := c.Servers(); !slices.Equal(now, known) {
				if err := lb.Update(now); err != nil {
					log.Warn("agent: updating the load balancer's servers", "err", err)
					continue
				}
				known = now
			}
		}
	}()
	return func() {
		cancel()
		<-done
		lb.Close()
	}, nil
}
