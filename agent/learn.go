package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"time"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// An agent learns the servers from GET /v1-<program>/apiservers. A k3s
// agent asks it after it has joined, never during the join
// (pkg/agent/tunnel/tunnel.go). A k3s server whose datastore does not
// answer answers it [] only after 5 s and keeps a core busy meanwhile
// (pkg/server/handlers/handlers.go APIServers). So the Client asks it
// from Renew alone: once an hour at most, of one server, with no
// failover. The state file's time carries the hour across restarts.

const (
	// learnEvery is the least time between two requests for the servers.
	learnEvery = time.Hour
	// maxServers bounds the servers kept from one answer.
	maxServers = 100
)

// learn asks one server for the list of servers and keeps what it
// answers, then saves the list. Called with c.mu held.
func (c *Client) learn(ctx context.Context) {
	c.learnt = time.Now()
	defer c.saveServers()
	if err := c.ensureTrust(ctx); err != nil {
		c.log.Info("agent: no list of servers", "err", err)
		return
	}
	order := c.servers.order(c.learnt)
	if len(order) == 0 {
		return
	}
	r := call{method: "GET", path: c.prefix + "/apiservers"}
	a, _, err := c.try(ctx, order[0], r)
	if err != nil {
		c.log.Info("agent: no list of servers", "server", order[0], "err", err)
		return
	}
	list, dropped, err := parseServers(a.body)
	if err != nil {
		c.log.Warn("agent: the list of servers is not a JSON array of strings", "server", a.addr, "err", err)
		return
	}
	if len(dropped) > 0 {
		c.log.Warn("agent: ignoring addresses the server announced: not host:port with a port of 1 to 65535", "server", a.addr, "addresses", dropped)
	}
	if len(list) > 0 && c.servers.update(c.atSupervisorPort(list)) {
		c.log.Info("agent: servers learnt", "servers", c.servers.addresses())
	}
}

// parseServers reads the first maxServers strings of a JSON array and
// returns the addresses that statefile.CheckAddress accepts, and those
// it refuses.
func parseServers(body []byte) (list, dropped []string, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, nil, errors.New("not an array")
	}
	for dec.More() && len(list)+len(dropped) < maxServers {
		var s string
		if err := dec.Decode(&s); err != nil {
			return nil, nil, err
		}
		if statefile.CheckAddress(s) != nil {
			dropped = append(dropped, s)
			continue
		}
		list = append(list, s)
	}
	return list, dropped, nil
}

// readPorts reads the supervisor's and the API server's ports from the
// servers' configuration. When they differ (RKE2: 9345 and 6443), the
// servers announced are API servers: the Client uses each one's host
// with the configured server's port, as k3s's agent does
// (pkg/agent/proxy/apiproxy.go setSupervisorPort). Servers kept with
// another port move to that one. Called with c.mu held.
func (c *Client) readPorts(config []byte) {
	var ports struct{ SupervisorPort, HTTPSPort int }
	c.supervisorPort = ""
	if json.Unmarshal(config, &ports) != nil || ports.SupervisorPort == 0 || ports.HTTPSPort == 0 ||
		ports.SupervisorPort == ports.HTTPSPort {
		return
	}
	_, c.supervisorPort, _ = net.SplitHostPort(c.servers.configuredAddr())
	if c.servers.update(c.atSupervisorPort(c.servers.addresses())) {
		c.log.Info("agent: servers moved to the supervisor's port", "servers", c.servers.addresses())
		c.saveServers()
	}
}

// atSupervisorPort is addrs with the supervisor's port, if readPorts
// found one.
func (c *Client) atSupervisorPort(addrs []string) []string {
	if c.supervisorPort == "" {
		return addrs
	}
	out := make([]string, len(addrs))
	for i, a := range addrs {
		host, _, _ := net.SplitHostPort(a)
		out[i] = net.JoinHostPort(host, c.supervisorPort)
	}
	return out
}

// saveServers writes the servers known to the state file.
func (c *Client) saveServers() {
	s := statefile.Servers{Default: "https://" + c.servers.configuredAddr(), Addresses: c.servers.addresses()}
	if err := statefile.Save(c.opts.StateFile, s); err != nil {
		c.log.Warn("agent: keeping the list of servers", "err", err)
	}
}

// untilLearn is how long until the servers are asked for their list
// again. Called with c.mu held.
func (c *Client) untilLearn() time.Duration {
	return time.Until(c.learnt.Add(learnEvery))
}
