package statefile

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// CheckAddress accepts a server's address, host:port, with a host and a
// port of 1 to 65535: one that can be dialed. It is the one check of
// every address the agent and its load balancer take in: their options,
// the servers' /apiservers answers and the state file.
func CheckAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port", a)
	}
	if host == "" {
		return fmt.Errorf("address %q has no host", a)
	}
	if err := checkPort(port); err != nil {
		return fmt.Errorf("address %q: %w", a, err)
	}
	return nil
}

func checkPort(port string) error {
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q is not 1 to 65535", port)
	}
	return nil
}

// HostPort is the host:port a server URL names, port 443 when it gives
// none (no colon after the host). Its port is checked as CheckAddress
// checks it.
func HostPort(u *url.URL) (string, error) {
	if u.Port() == "" && !strings.HasSuffix(u.Host, ":") {
		return net.JoinHostPort(u.Hostname(), "443"), nil
	}
	if err := checkPort(u.Port()); err != nil {
		return "", err
	}
	return u.Host, nil
}
