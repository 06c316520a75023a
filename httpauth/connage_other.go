//go:build !linux

package httpauth

import (
	"net"
	"time"
)

// connAge is not known here: a connection comes when it is accepted.
func connAge(net.Conn) (time.Duration, bool) { return 0, false }
