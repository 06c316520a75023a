package agent

import (
	"errors"
	"net"
	"strings"
)

// The node's addresses go to the servers in the node-password requests'
// K3s-Node-Ip header, and a k3s server makes them the serving
// certificate's IP SANs (pkg/server/handlers/handlers.go
// ServingKubeletCert). The API server dials the kubelet at the node's
// InternalIP first, so a serving certificate is kept only while it names
// every address the agent sends now (see Client.rule).
//
// They are Options.NodeIP, or else the source addresses of the default
// routes, as k3s's agent finds them (pkg/util/net.go GetHostnameAndIPs)
// at every attempt. A node with neither, early in a boot before its
// network is up, has no address to send: its attempt fails, and the next
// one looks again. k3s's agent does the same (pkg/agent/config/config.go
// get: "failed to get node name and addresses"). An agent that sent no
// address would get, or keep, a serving certificate that the API server
// cannot use.

// errNoAddress ends an attempt of a node that has no address.
var errNoAddress = errors.New("agent: the node has no address for its serving certificate: no default route, and Options.NodeIP is empty")

// addresses sets c.ips to the node's addresses now. Called with c.mu
// held, at the start of an attempt.
func (c *Client) addresses() error {
	c.ips = nil
	for _, s := range strings.Split(c.opts.NodeIP, ",") {
		if ip := net.ParseIP(strings.TrimSpace(s)); ip != nil { // fill checked them
			c.ips = append(c.ips, ip)
		}
	}
	if len(c.ips) == 0 {
		c.ips = c.routeIPs()
	}
	if len(c.ips) == 0 {
		return errNoAddress
	}
	return nil
}

// defaultRouteIPs returns the source addresses of the IPv4 default route,
// then of the IPv6 one: those of the routes to documentation addresses
// (RFC 5737, RFC 3849). No packet is sent: the kernel only picks the
// route.
func defaultRouteIPs() []net.IP {
	var ips []net.IP
	for _, dst := range []string{"198.51.100.1:9", "[2001:db8::1]:9"} {
		if conn, err := net.Dial("udp", dst); err == nil {
			if ip := conn.LocalAddr().(*net.UDPAddr).IP; ip.IsGlobalUnicast() {
				ips = append(ips, ip)
			}
			conn.Close()
		}
	}
	return ips
}

// joinIPs is ips as the Node-Ip header carries them: comma-separated.
func joinIPs(ips []net.IP) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}
