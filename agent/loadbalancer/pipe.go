package loadbalancer

import (
	"io"
	"net"
)

// pipe is one proxied connection: a client's and the server's it was
// dialed to. Its run is the only reader and writer of both; close may be
// called from anywhere, any number of times.
type pipe struct {
	client, server net.Conn
}

// run copies bytes both ways until both directions end. A direction that
// reaches EOF half-closes the other side (CloseWrite), so a client that
// shuts its writing side still gets its answer; a direction that fails
// closes both connections, which ends the other one.
func (p *pipe) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.copy(p.server, p.client)
	}()
	p.copy(p.client, p.server)
	<-done
	p.close()
}

// closeWriter is implemented by *net.TCPConn and *net.UnixConn.
type closeWriter interface{ CloseWrite() error }

// copy copies src to dst (by splice(2) between two TCP connections on
// Linux). A connection that cannot half-close (one from a custom
// DialContext) is closed whole.
func (p *pipe) copy(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(closeWriter); ok && err == nil && cw.CloseWrite() == nil {
		return
	}
	p.close()
}

func (p *pipe) close() {
	p.client.Close()
	p.server.Close()
}
