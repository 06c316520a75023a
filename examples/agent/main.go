// Command agent gets a node's certificates from k3s-style servers (such
// as examples/server) with the nodepass agent package. It backs off with
// jitter, moves each request past a server that fails or hangs, and keeps
// the certificates on disk that are still valid.
//
//	go run ./examples/agent -server https://127.0.0.1:9345 -token-file token -node-name worker-1 -data-dir /tmp/worker-1
//
// It exits 0 once the node holds its four certificates, valid, and prints
// one line for each. With -wait it stays up, renews them and learns the
// servers until SIGINT or SIGTERM. The flags that k3s's agent has keep
// k3s's names. -h prints them all, -version the version. Logs go to
// stderr.
//
// A wrong flag or flag value exits 2 with one line on stderr: a port
// that cannot be dialed (0, 99999, none) in -server or -servers among
// them. A failure exits 1 with one line: a -token-file or -data-dir that
// cannot be read or written, no certificates within -timeout, or an
// answer that asking again will not mend. Those answers end the command
// within one attempt: the token rejected (401), or its CA hash not the
// servers' CA; the node password rejected (403); a route the server does
// not serve (404, -program k3s against RKE2, say: the line suggests
// -program); a node name the server refuses (400). k3s's own agent
// retries all of these every 5 to 10 s for ever and logs each at INFO
// (pkg/agent/config/config.go Get). It runs as a
// service that must come up once the cluster is mended. This command is
// run by an operator, who needs the reason at once. The agent package
// itself waits the backoff's cap between such attempts, unless told to
// stop (Options.StopOnRejection), as this command does.
//
// With K3S_AGENT_HTTP_PROXY_ALLOWED=true in its environment (RKE2_...
// with -program rke2) it reaches the servers through the HTTP proxy that
// HTTPS_PROXY and NO_PROXY give for -server, as k3s's agent does
// (proxy.go says how).
//
// With -wait and -lb-listen ADDR it also runs the agent's local load
// balancer (agent/loadbalancer) on ADDR, as a k3s agent runs one on
// 127.0.0.1:6444 for the kubelet and the rest of the node, through the
// same proxy. Connections to ADDR go round robin to the servers known to
// answer its HTTPS health probe (GET /ping), and a server that stops
// answering is dropped within about four seconds of the first connection
// that waits on it (its log says so). The probes trust the cluster's CA
// only.
// The agent's own requests do not go through the load balancer: the
// Client already moves each request past a server that fails, at the
// HTTP layer, where it also reads Retry-After and tells a request that
// hangs from one that is slow. The load balancer is for the node's other
// components, which see only TCP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/examples/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cli.Main(ctx, "agent", os.Args[1:], os.Stdout, os.Stderr, run))
}

// run parses args, gets the certificates (and with -wait renews them
// until ctx ends), and returns what went wrong: a cli.UsageError for a
// wrong flag. The log goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if cfg.debug {
		level = slog.LevelDebug
	}
	cfg.opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if cfg.opts.DialContext, err = proxyDial(cfg.opts.Program, cfg.opts.Server, cfg.opts.Logger); err != nil {
		return &cli.UsageError{Err: err}
	}
	c, err := agent.New(&cfg.opts)
	if err != nil {
		return cli.UsageUnlessIO(err) // a wrong option, or a node password file that cannot be used
	}
	defer c.Close()

	getCtx := ctx
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		getCtx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	res, err := c.Get(getCtx)
	if errors.Is(err, agent.ErrNoRoute) {
		return fmt.Errorf("%w (is -program %s right? k3s serves /v1-k3s, RKE2 /v1-rke2)", err, cfg.opts.Program)
	}
	if err != nil {
		return err
	}
	if res.Offline != nil {
		fmt.Fprintln(stdout, "no server answered; the certificates on disk are valid and used")
	}
	for _, cr := range res.Certs {
		what := "kept"
		switch {
		case cr.Issued:
			what = "issued"
		case cr.Err != nil:
			what = "kept (renewal failed, retried with -wait)"
		}
		fmt.Fprintf(stdout, "%s %s, valid until %s\n", what, cr.CertFile, cr.Verdict.NotAfter.UTC().Format(time.RFC3339))
	}
	if !cfg.wait {
		return nil
	}
	if cfg.lbListen != "" {
		stopLB, err := startLoadBalancer(ctx, cfg, c, res, cfg.opts.Logger)
		if err != nil {
			return err
		}
		defer stopLB()
		fmt.Fprintf(stdout, "load balancer on %s\n", cfg.lbListen)
	}
	if err := c.Renew(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// config is what the flags say.
type config struct {
	opts     agent.Options
	timeout  time.Duration
	wait     bool
	debug    bool
	lbListen string // the local load balancer's address; "" for none
}

func parseFlags(args []string, stdout io.Writer) (config, error) {
	var c config
	o := &c.opts
	var tokenFile, servers string
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	// k3s's names.
	fs.StringVar(&o.Server, "server", "", "`URL` of the server to join, https://host:port (k3s --server)")
	fs.StringVar(&o.Token, "token", "", "join token: K10<CA hash>::<user>:<password>, a bootstrap token or a bare password (k3s --token)")
	fs.StringVar(&tokenFile, "token-file", "", "`file` holding the join token (k3s --token-file)")
	fs.StringVar(&o.NodeName, "node-name", "", "the node's name (k3s --node-name); default the host name")
	fs.StringVar(&o.NodeIP, "node-ip", "", "the node's addresses, comma-separated, for the serving certificate (k3s --node-ip); default the default routes' addresses")
	fs.StringVar(&o.DataDir, "data-dir", "/var/lib/rancher/k3s", "`directory` for the agent's files: certificates and keys under agent/ (k3s --data-dir)")
	fs.BoolVar(&c.debug, "debug", false, "log at debug level (k3s --debug)")
	// The example's own.
	fs.StringVar(&o.Program, "program", "k3s", "k3s or rke2: route prefix (/v1-<program>), node headers and the controller certificate's name")
	fs.StringVar(&o.NodePasswordFile, "node-password-file", "", "`file` of the node's password, made if missing (default <data-dir>/agent/etc/rancher/node/password, k3s's rootless location; k3s's own is /etc/rancher/node/password)")
	fs.StringVar(&servers, "servers", "", "comma-separated host:port of servers known besides -server, in place of the list kept from an earlier run")
	fs.BoolVar(&c.wait, "wait", false, "stay up after getting the certificates, and renew them (until SIGINT or SIGTERM)")
	fs.StringVar(&c.lbListen, "lb-listen", "", "with -wait, run the node's local load balancer on this `address` (k3s: 127.0.0.1:6444) in front of the servers known")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "give up getting the certificates after this long (0: never)")
	fs.DurationVar(&o.HeaderTimeout, "header-timeout", agent.DefaultHeaderTimeout, "how long a server may take to start answering before the request moves to the next")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", agent.DefaultRequestTimeout, "bound on a request (k3s's client timeout)")
	fs.DurationVar(&o.RecoveryDelay, "recovery-delay", agent.DefaultRecoveryDelay, "how long a server that failed is left out")
	fs.DurationVar(&o.Backoff.Base, "backoff-base", agent.DefaultBackoffBase, "ceiling of the first wait between attempts (doubling after each failure)")
	fs.DurationVar(&o.Backoff.Cap, "backoff-cap", agent.DefaultBackoffCap, "cap of the waits between attempts, and of a server's Retry-After")
	fs.Float64Var(&o.RenewAfter, "renew-after", agent.DefaultRenewAfter, "fraction of a certificate's lifetime after which it is renewed (jittered over the next two thirds of the rest)")
	if err := cli.Parse(fs, args, stdout); err != nil {
		return c, err
	}
	if c.timeout < 0 {
		return c, cli.Usagef("agent: -timeout %v: want 0 (never) or more", c.timeout)
	}
	if o.Server == "" {
		return c, cli.Usagef("agent: -server is required")
	}
	if c.lbListen != "" && !c.wait {
		return c, cli.Usagef("agent: -lb-listen needs -wait: the load balancer serves the node while the agent stays up")
	}
	if _, _, err := net.SplitHostPort(c.lbListen); c.lbListen != "" && err != nil {
		return c, cli.Usagef("agent: -lb-listen %q: %v", c.lbListen, err)
	}
	switch {
	case o.Token != "" && tokenFile != "":
		return c, cli.Usagef("agent: -token and -token-file are exclusive")
	case tokenFile != "":
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return c, fmt.Errorf("agent: -token-file: %w", err) // a failure, not a wrong flag (see cli)
		}
		o.Token = strings.TrimSpace(string(b))
	case o.Token == "":
		return c, cli.Usagef("agent: -token or -token-file is required")
	}
	if o.NodePasswordFile == "" {
		o.NodePasswordFile = filepath.Join(o.DataDir, "agent", "etc", "rancher", "node", "password")
	}
	if servers != "" {
		for _, s := range strings.Split(servers, ",") {
			o.Servers = append(o.Servers, strings.TrimSpace(s)) // agent.New checks each
		}
	}
	// The agent gives up on what asking again does not mend: see the
	// package doc.
	o.StopOnRejection = true
	return c, nil
}
