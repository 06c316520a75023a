package loadbalancer

import (
	"io"
	"net"
	"sync"
	"time"
)

// pipe is one proxied connection: a client's and the server's it was
// dialed to. Its run is the only reader and writer of both; close may be
// called from anywhere, any number of times.
type pipe struct {
	client, server net.Conn
	watch          watch
}

// run copies bytes both ways until both directions end. A direction that
// reaches EOF half-closes the other side (CloseWrite), so a client that
// shuts its writing side still gets its answer; a direction that fails
// closes both connections, which ends the other one.
func (p *pipe) run() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.copy(p.server, p.client, p.watch.sent)
	}()
	p.copy(p.client, p.server, p.watch.answered)
	<-done
	p.watch.end()
	p.close()
}

// closeWriter is implemented by *net.TCPConn and *net.UnixConn.
type closeWriter interface{ CloseWrite() error }

// copy copies src to dst: chunk by chunk while note, told of each chunk,
// asks for more, then by io.Copy (splice(2) between two TCP connections
// on Linux). A connection that cannot half-close (one from a custom
// DialContext) is closed whole.
func (p *pipe) copy(dst, src net.Conn, note func(n int) bool) {
	eof, err := copyNoting(dst, src, note)
	if !eof && err == nil {
		_, err = io.Copy(dst, src)
	}
	if cw, ok := dst.(closeWriter); ok && err == nil && cw.CloseWrite() == nil {
		return
	}
	p.close()
}

// chunks are copyNoting's buffers.
var chunks = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copyNoting copies src to dst chunk by chunk, telling note of each,
// until note returns false (then it returns, nothing read and not yet
// written), src ends (eof) or a read or write fails.
func copyNoting(dst io.Writer, src io.Reader, note func(n int) bool) (eof bool, err error) {
	buf := chunks.Get().(*[32 << 10]byte)
	defer chunks.Put(buf)
	for {
		n, rerr := src.Read(buf[:])
		more := n == 0 || note(n)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return false, err
			}
		}
		switch {
		case rerr == io.EOF:
			return true, nil
		case rerr != nil:
			return false, rerr
		case !more:
			return false, nil
		}
	}
}

// watchBytes ends a watch whose server has sent this much: more than a
// TLS handshake sends, so an answer.
const watchBytes = 64 << 10

// watch follows the first exchanges of a proxied connection, to see
// whether its server answers: when the client has sent bytes and the
// server sends nothing back within timeout, waited is called (once per
// wait). It ends once the server has answered twice (a TLS handshake,
// then a request) or sent watchBytes: after that, a silence is a
// connection at rest (a watch with no event, a tunnel between pings),
// and both directions are copied untouched.
type watch struct {
	timeout time.Duration
	waited  func()

	mu      sync.Mutex
	wait    *time.Timer // mu: runs (or has fired) while the client waits; nil when it does not
	answers int         // mu: answers so far
	served  int64       // mu: bytes from the server so far
	over    bool        // mu: the watch has ended; set once
}

// sent notes n bytes from the client, and reports whether to go on
// watching.
func (w *watch) sent(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return false
	}
	if w.wait == nil {
		w.wait = time.AfterFunc(w.timeout, w.waited)
	}
	return true
}

// answered notes n bytes from the server, and reports whether to go on
// watching.
func (w *watch) answered(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return false
	}
	if w.wait != nil {
		w.wait.Stop()
		w.wait = nil
		w.answers++
	}
	w.served += int64(n)
	w.over = w.answers >= 2 || w.served >= watchBytes
	return !w.over
}

// end ends the watch, and a wait in progress with it.
func (w *watch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wait != nil {
		w.wait.Stop()
		w.wait = nil
	}
	w.over = true
}

func (p *pipe) close() {
	p.client.Close()
	p.server.Close()
}
