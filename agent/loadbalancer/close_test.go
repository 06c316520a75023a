package loadbalancer

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// openSockets lists the process's open sockets, or nil where there is no
// /proc/self/fd (not Linux). Only sockets: the pipes that Go's splice(2)
// between two TCP connections keeps in a pool stay open until the
// garbage collector frees them.
func openSockets() []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	out := []string{}
	for _, e := range ents {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(target, "socket:") {
			out = append(out, e.Name()+" -> "+target)
		}
	}
	return out
}

// closedByPeer reports whether err is how a read sees a connection its
// peer closed: EOF (nil from io.Copy) or a reset.
func closedByPeer(err error) bool {
	return err == nil || errors.Is(err, syscall.ECONNRESET)
}

// lbGoroutines are the stacks of goroutines running the package's code
// (not its tests'). A goroutine whose last act was to tell Close it is
// done (closing a channel, a WaitGroup's Done) can still be on its way
// out when Close returns; such stacks go within a few scheduler rounds,
// so the list is taken again, up to 100 times, 1 ms apart, until it is
// empty. A goroutine that waits on anything stays in every list.
func lbGoroutines() []string {
	var left []string
	for range 100 {
		if left = lbStacks(); len(left) == 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return left
}

func lbStacks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, f := range []string{"(*LoadBalancer)", "(*prober)", "(*pipe)", "loadbalancer.probeLoop"} {
			if strings.Contains(g, "agent/loadbalancer."+strings.TrimPrefix(f, "loadbalancer.")) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

// Close leaves nothing: when it returns, no goroutine of the package runs,
// with connections proxied, a transfer under way, a probe waiting on a
// hung server and a dial waiting on one that never answers; once the
// test's own connections and servers are closed, no socket opened since
// it started is open. Not parallel: it lists the whole process's.
func TestCloseLeavesNothing(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the poller's descriptors, before the count
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	before := openSockets()

	a, b, h := newBackend(t, "a"), newBackend(t, "b"), newBackend(t, "hung")
	h.set(hung)
	blackhole := newBackend(t, "blackhole")
	o := testOptions(t, a.addr, a.addr, b.addr, h.addr, blackhole.addr)
	dialing := make(chan struct{}, 100)
	var holes atomic.Bool // once set, dials to the blackhole never end
	o.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == blackhole.addr && holes.Load() {
			dialing <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return new(net.Dialer).DialContext(ctx, network, addr)
	}
	o.DialTimeout = time.Hour
	lb, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three healthy servers", inState(lb, StateHealthy, a.addr, b.addr, blackhole.addr))
	holes.Store(true)
	var clients []net.Conn
	for range 8 { // to a, b and the blackhole in turn, those to the blackhole still dialing
		c, err := net.Dial("tcp", lb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "stream 1073741824\n")
		clients = append(clients, c)
	}
	<-dialing
	waitFor(t, "a probe waiting on the hung server", func() bool { return h.pings.Load() > 0 })
	waitFor(t, "transfers under way", func() bool { return a.raw.Load() > 0 && b.raw.Load() > 0 })

	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if left := lbGoroutines(); len(left) > 0 {
		t.Errorf("goroutines left after Close:\n%s", strings.Join(left, "\n\n"))
	}
	if err := lb.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	for _, c := range clients {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); !closedByPeer(err) {
			t.Errorf("a client's connection was not closed: %v", err)
		}
		c.Close()
	}
	for _, s := range []*backend{a, b, h, blackhole} {
		s.close()
	}

	goleak.VerifyNone(t, ignore)
	if before == nil {
		t.Log("no /proc/self/fd: sockets not counted")
	} else if left := slices.DeleteFunc(openSockets(), func(s string) bool { return slices.Contains(before, s) }); len(left) > 0 {
		t.Errorf("%d sockets opened during the test are still open:\n%s", len(left), strings.Join(left, "\n"))
	}
}
