package loadbalancer

import (
	"fmt"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// The state file is statefile.Servers, the format k3s's load balancer
// keeps: {"ServerURL": "https://<default>", "ServerAddresses": [...]},
// the listed servers without a standby default. As in k3s, a file whose
// ServerURL is not the configured server's is another cluster's, and
// ignored.

// loadState returns the addresses in the state file, or none when it is
// missing, corrupt or another server's.
func (lb *LoadBalancer) loadState() []string {
	path := lb.opts.StateFile
	st, err := statefile.Load(path)
	if err != nil {
		lb.log.Warn("loadbalancer: ignoring the state file", "file", path, "err", err)
		return nil
	}
	if !st.For(lb.opts.Default) {
		if !st.Empty() {
			lb.log.Warn("loadbalancer: ignoring the state file: it is for another server", "file", path, "server", st.Default, "configured", lb.opts.Default)
		}
		return nil
	}
	if len(st.Dropped) > 0 {
		lb.log.Warn("loadbalancer: ignoring addresses in the state file: not host:port with a port of 1 to 65535", "file", path, "addresses", st.Dropped)
	}
	return st.Addresses
}

// saveState writes the list to the state file, if there is one. Callers
// hold saveMu, or are New.
func (lb *LoadBalancer) saveState() error {
	if lb.opts.StateFile == "" {
		return nil
	}
	st := statefile.Servers{Addresses: lb.addresses()}
	if lb.opts.Default != "" {
		st.Default = "https://" + lb.opts.Default
	}
	if err := statefile.Save(lb.opts.StateFile, st); err != nil {
		return fmt.Errorf("loadbalancer: saving the server list: %w", err)
	}
	return nil
}
