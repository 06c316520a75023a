//go:build linux

package httpauth

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestConnContextCountsAcceptLag: a connection accepted late comes when
// the kernel last heard from it, over TLS too; one that is not TCP comes
// when it is accepted.
func TestConnContextCountsAcceptLag(t *testing.T) {
	const (
		lag  = 300 * time.Millisecond
		tick = 10 * time.Millisecond // the kernel's clock tick, at most
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !tcpInfoFilled(t, ln) {
		// qemu-user (make test-arm64) answers getsockopt(TCP_INFO) with
		// every field zero but the state.
		t.Skip("TCP_INFO reads as zeros here (an emulator that does not pass it through): no accept lag to read")
	}
	came := func(wrap func(net.Conn) net.Conn) (dialed, arrival, accepted time.Time) {
		dialed = time.Now()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("hello")); err != nil { // as a ClientHello
			t.Fatal(err)
		}
		time.Sleep(lag) // the accept loop is behind
		sc, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		accepted = time.Now()
		ctx := ConnContext(context.Background(), wrap(sc))
		return dialed, ctx.Value(connKey{}).(*conn).came, accepted
	}
	for name, wrap := range map[string]func(net.Conn) net.Conn{
		"tcp": func(c net.Conn) net.Conn { return c },
		"tls": func(c net.Conn) net.Conn { return tls.Server(c, &tls.Config{}) },
	} {
		dialed, arrival, accepted := came(wrap)
		if arrival.Before(dialed.Add(-tick)) || arrival.After(accepted.Add(-lag+tick)) {
			t.Errorf("%s: came %v after the dial, accepted %v after it; want within a tick of the dial, %v before the accept",
				name, arrival.Sub(dialed), accepted.Sub(dialed), lag)
		}
	}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	before := time.Now()
	arrival := ConnContext(context.Background(), a).Value(connKey{}).(*conn).came
	if arrival.Before(before) {
		t.Errorf("a pipe came %v before it was accepted", before.Sub(arrival))
	}
}

// tcpInfoFilled reports whether the kernel fills TCP_INFO for a
// connection accepted from ln: a real one always gives an established
// connection a positive retransmission timeout.
func tcpInfoFilled(t *testing.T, ln net.Listener) bool {
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	raw, err := sc.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	raw.Control(func(fd uintptr) { info, _ = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	return info != nil && info.Rto > 0
}
