//go:build linux

package httpauth

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// connAge returns how long ago the kernel last received anything on nc's
// TCP connection (its handshake's last ACK, or data such as a TLS
// ClientHello, which a client sends at once): for a connection just
// accepted, about how long it waited to be. ok is false when nc is not a
// TCP connection or the kernel does not say.
func connAge(nc net.Conn) (age time.Duration, ok bool) {
	if u, isTLS := nc.(interface{ NetConn() net.Conn }); isTLS {
		nc = u.NetConn()
	}
	sc, isSys := nc.(syscall.Conn)
	if !isSys {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var infoErr error
	if err := raw.Control(func(fd uintptr) {
		info, infoErr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || infoErr != nil {
		return 0, false
	}
	age = time.Duration(max(info.Last_data_recv, info.Last_ack_recv)) * time.Millisecond
	return min(age, maxConnAge), true
}

// maxConnAge bounds what connAge is trusted with: an agent's client does
// not wait longer than that.
const maxConnAge = 5 * time.Minute
