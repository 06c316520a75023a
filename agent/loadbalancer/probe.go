package loadbalancer

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// probeLoop probes at once, then as often as record says after each
// result (the time from a probe's start to the next one's), or sooner
// when wake asks, but never within interval of the last start; until ctx
// ends. Probes never overlap.
func probeLoop(ctx context.Context, interval time.Duration, wake <-chan struct{}, probe func(context.Context) error, record func(error) time.Duration) {
	t := time.NewTimer(0)
	defer t.Stop()
	var last, due time.Time // the last probe's start, the next one's
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
			if soonest := last.Add(interval); soonest.After(time.Now()) {
				if soonest.Before(due) {
					due = soonest
					t.Reset(time.Until(due))
				}
				continue
			}
		case <-t.C:
		}
		last = time.Now()
		err := probe(ctx)
		if ctx.Err() != nil {
			return
		}
		due = last.Add(record(err))
		t.Reset(time.Until(due))
	}
}

// maxProbeBody bounds the answer read; k3s's /ping is "pong".
const maxProbeBody = 64 << 10

// prober probes one server over one TLS connection kept alive between
// probes. Only its goroutine uses it.
type prober struct {
	lb      *LoadBalancer
	s       *server
	tls     *tls.Config
	request []byte // the GET, written as is

	conn *tls.Conn // nil until a probe connects, and after a failure
	br   *bufio.Reader
}

func newProber(lb *LoadBalancer, s *server) *prober {
	cfg := lb.opts.Probe.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(s.addr)
	}
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.ClientSessionCache == nil {
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	}
	req := "GET " + lb.opts.Probe.Path + " HTTP/1.1\r\nHost: " + s.addr + "\r\nUser-Agent: nodepass-loadbalancer\r\n\r\n"
	return &prober{lb: lb, s: s, tls: cfg, request: []byte(req)}
}

// checkPath refuses a probe path that would not make one request line.
func checkPath(p string) error {
	if p[0] != '/' || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("loadbalancer: Options.Probe.Path %q is not a path", p)
	}
	return nil
}

// run probes s until ctx ends (Update removed s, or Close).
func (pr *prober) run(ctx context.Context) {
	defer pr.disconnect()
	record := func(err error) time.Duration { return pr.lb.record(pr.s, "probe", err) }
	probeLoop(ctx, pr.lb.opts.Probe.Interval, pr.s.wake, pr.probe, record)
}

// probe is one GET within Probe.Timeout; an error is a failure. A kept
// connection that the server closed while idle (as a server with an idle
// timeout below the probes' interval does) ends without an answer: the
// GET is sent again once, on a new connection, as net/http's Transport
// retries a request on a kept connection.
func (pr *prober) probe(ctx context.Context) error {
	pr.s.probes.Add(1)
	tctx, cancel := context.WithTimeout(ctx, pr.lb.opts.Probe.Timeout)
	defer cancel()
	kept := pr.conn != nil
	err := pr.get(tctx)
	if err != nil && kept && tctx.Err() == nil && closedIdle(err) {
		pr.disconnect()
		err = pr.get(tctx)
	}
	if err == nil {
		return nil
	}
	pr.disconnect()
	if ctx.Err() == nil { // not stopped by Update or Close
		pr.s.probeFailures.Add(1)
	}
	return fmt.Errorf("loadbalancer: probe of %s: %w", pr.s.addr, err)
}

// closedIdle reports whether err is how a request on a connection its
// server had closed ends: EOF before an answer, or a reset.
func closedIdle(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get connects if need be, sends the request and reads the answer. When
// ctx ends first, the connection is closed, which ends the read.
func (pr *prober) get(ctx context.Context) error {
	if pr.conn == nil {
		if err := pr.connect(ctx); err != nil {
			return err
		}
	}
	c := pr.conn
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		close(closed)
	})
	defer func() {
		if !stop() {
			// The AfterFunc runs or has run: wait until it has closed
			// the connection, so that nothing of the probe outlives it
			// (Close's promise), and drop the connection.
			<-closed
			pr.conn, pr.br = nil, nil
		}
	}()
	if _, err := c.Write(pr.request); err != nil {
		return ctxErr(ctx, err)
	}
	resp, err := http.ReadResponse(pr.br, nil)
	if err != nil {
		return ctxErr(ctx, err)
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	if err != nil {
		return ctxErr(ctx, err)
	}
	if resp.Close {
		pr.disconnect()
	}
	return nil
}

// ctxErr names the timeout (or Close) when it is what ended err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

func (pr *prober) connect(ctx context.Context) error {
	raw, err := pr.lb.opts.DialContext(ctx, "tcp", pr.s.addr)
	if err != nil {
		return err
	}
	c := tls.Client(raw, pr.tls)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return ctxErr(ctx, fmt.Errorf("TLS handshake: %w", err))
	}
	pr.conn, pr.br = c, bufio.NewReaderSize(c, 4096)
	return nil
}

func (pr *prober) disconnect() {
	if pr.conn != nil {
		pr.conn.Close()
		pr.conn, pr.br = nil, nil
	}
}
