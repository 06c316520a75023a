package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodepass/nodepass/examples/internal/cli"
	"github.com/nodepass/nodepass/verify"
)

// config is what the flags say.
type config struct {
	addr        string
	store       string // "memory", "dir" or "kube"
	storeSet    bool   // -store was given: the user chose where hashes live
	storeDir    string // the files of -store dir
	kubeconfig  string
	namespace   string
	program     string
	logN        int
	concurrent  int
	caFile      string
	tlsSANs     []string
	drain       time.Duration
	syncTimeout time.Duration
	verbose     bool
	failOpen    bool   // verify.Options.FailOpen
	digestKey   string // file of verify.Options.DigestKey; "" for none
	tokenFile   string // the join tokens (loadTokenFile); "" for none
	dataDir     string // where the CAs are kept; "" for in memory
	apiservers  []string
	notBefore   notBeforeRule // of the certificates the CAs sign
	caAgeYears  int           // how old new CAs are
	caChain     bool          // new CAs are intermediates of a root
	// apiserverPort is the API servers' port; 0: the supervisor's with
	// k3s, rke2APIServerPort with rke2.
	apiserverPort int
	noDatastore   bool // /apiservers answers [] after noDatastoreWait
}

// parseFlags reads args; -h and -version print to out. Every wrong flag
// or value is a cli.UsageError of one line.
func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	var sans, apiservers string
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:9345", "`address` to listen on (host:port; port 0 picks one)")
	fs.StringVar(&c.store, "store", "memory", "where node password hashes live: memory (this process alone), dir (files in -store-dir, which servers on one machine share), or kube (Secrets, as k3s and RKE2 keep them)")
	fs.StringVar(&c.storeDir, "store-dir", "", "the `directory` of -store dir, one file per node (default: -data-dir/node-passwords)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig `file` for -store kube; empty means $KUBECONFIG, ~/.kube/config, then in-cluster")
	fs.StringVar(&c.namespace, "namespace", "kube-system", "namespace of the node-password secrets for -store kube")
	fs.StringVar(&c.program, "program", "k3s", "k3s or rke2: route prefix, header names and secret names")
	fs.IntVar(&c.logN, "logn", 15, "scrypt cost exponent for new hashes (15 is what k3s uses; stored hashes keep their own)")
	fs.IntVar(&c.concurrent, "max-concurrent", 0, "scrypt computations at once; 0 means GOMAXPROCS")
	fs.StringVar(&c.caFile, "ca-file", "", "write the server CA bundle (/cacerts) to this `file` (for curl --cacert)")
	fs.StringVar(&sans, "tls-san", "", "extra comma-separated DNS names or IPs for the server's certificate (no wildcards)")
	fs.StringVar(&c.tokenFile, "token-file", "", "join tokens agents must send as basic auth on every request but /cacerts and /ping: a k3s passwd `file` (password,user,uid[,groups] lines), or one token read as k3s reads its --token-file (a bare password, or K10<hash>::<user>:<password>; the users node and server; a line with a comma is a passwd line unless it starts with K10); without it the agents' other routes (config, CA files, apiservers, kube-proxy and controller certificates) are not served")
	fs.StringVar(&c.dataDir, "data-dir", "", "keep the CAs in `DIR`/tls, made on first start; servers given one DIR share them (default: new CAs in memory)")
	fs.StringVar(&apiservers, "apiservers", "", "comma-separated host:port of the API servers /v1-<prog>/apiservers announces to agents (default: this server's host at -apiserver-port)")
	fs.IntVar(&c.apiserverPort, "apiserver-port", 0, "the API servers' `port`, announced in /v1-<prog>/config (HTTPSPort); 0: this server's port with -program k3s (k3s serves both on one port), 6443 with rke2 (RKE2's supervisor is on 9345)")
	fs.BoolVar(&c.noDatastore, "no-datastore", false, "answer /v1-<prog>/apiservers as k3s does when its datastore does not answer: [] after 5 s")
	notBefore := fs.String("not-before", string(notBeforeRecent), "the NotBefore of the certificates the CAs sign (NotAfter is a year later): recent, max(now - 1 h, the CA's NotBefore), as k3s and RKE2 today; or ca, the CA's NotBefore, as older releases (NotAfter a year from now)")
	fs.IntVar(&c.caAgeYears, "ca-age-years", 0, "make new CAs this many `years` old (0 to 9; their NotBefore in the past), to test agents against an old cluster")
	fs.BoolVar(&c.caChain, "ca-chain", false, "make new CAs intermediates of a root of their own, so that /cacerts is a chain (CA, root), as a k3s cluster with a custom CA; agents pin the root (the ca-hash the server logs); the kubelet CA has a root apart, so that no node's serving certificate passes for a server")
	fs.DurationVar(&c.drain, "shutdown-timeout", 10*time.Second, "how long a graceful shutdown waits for requests in flight (0: not at all)")
	fs.DurationVar(&c.syncTimeout, "sync-timeout", time.Minute, "how long -store kube waits for its secret cache before serving")
	fs.BoolVar(&c.verbose, "v", false, "log at debug level")
	fs.StringVar(&c.digestKey, "digest-key-file", "", "remember verified passwords as HMAC digests in the store under the key in this `file` (made with 32 random bytes, mode 0600, if absent); every server sharing the store needs the same key")
	fs.BoolVar(&c.failOpen, "enroll-fail-open", false, "let a new node in when its hash cannot be stored (e.g. a secret-validating webhook is down), as k3s does, and retry storing it in the background")
	if err := cli.Parse(fs, args, out); err != nil {
		return c, err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "store" {
			c.storeSet = true
		}
	})
	if err := checkAddr(c.addr); err != nil {
		return c, cli.Usagef("server: -addr %q: %v", c.addr, err)
	}
	switch c.store {
	case "memory", "kube":
	case "dir":
		if c.storeDir == "" && c.dataDir == "" {
			return c, cli.Usagef("server: -store dir: give -store-dir or -data-dir")
		}
		if c.storeDir == "" {
			c.storeDir = filepath.Join(c.dataDir, "node-passwords")
		}
	default:
		return c, cli.Usagef("server: -store %q: want memory, dir or kube", c.store)
	}
	switch c.program {
	case "k3s", "rke2":
	default:
		return c, cli.Usagef("server: -program %q: want k3s or rke2", c.program)
	}
	switch c.notBefore = notBeforeRule(*notBefore); c.notBefore {
	case notBeforeRecent, notBeforeCA:
	default:
		return c, cli.Usagef("server: -not-before %q: want %s or %s", c.notBefore, notBeforeRecent, notBeforeCA)
	}
	if c.caAgeYears < 0 || time.Duration(c.caAgeYears)*year >= caValidity {
		return c, cli.Usagef("server: -ca-age-years %d: want 0 to 9 (a CA is valid for 10 years)", c.caAgeYears)
	}
	v, err := verify.New(verify.NewMemoryStore(), &verify.Options{Params: c.params()})
	if err != nil {
		return c, cli.Usagef("server: -logn %d: %w", c.logN, err)
	}
	v.Close()
	switch {
	case c.apiserverPort < 0 || c.apiserverPort > 65535:
		return c, cli.Usagef("server: -apiserver-port %d: want 0 to 65535", c.apiserverPort)
	case c.namespace == "":
		return c, cli.Usagef("server: -namespace is empty")
	case c.concurrent < 0:
		return c, cli.Usagef("server: -max-concurrent %d: want 0 (GOMAXPROCS) or more", c.concurrent)
	case c.drain < 0:
		return c, cli.Usagef("server: -shutdown-timeout %v: want 0 or more", c.drain)
	case c.syncTimeout <= 0:
		return c, cli.Usagef("server: -sync-timeout %v: want more than 0", c.syncTimeout)
	}
	for _, s := range strings.Split(sans, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if err := checkSAN(s); err != nil {
			return c, cli.Usagef("server: -tls-san %q: %v", s, err)
		}
		c.tlsSANs = append(c.tlsSANs, s)
	}
	for _, s := range strings.Split(apiservers, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if err := checkAddr(s); err != nil {
			return c, cli.Usagef("server: -apiservers %q: %v", s, err)
		}
		if !slices.Contains(c.apiservers, s) {
			c.apiservers = append(c.apiservers, s)
		}
	}
	if c.store == "memory" && len(c.apiservers) > 1 {
		return c, cli.Usagef("server: -store memory with -apiservers naming %d servers: %s", len(c.apiservers), memoryNotShared)
	}
	return c, nil
}

// caOptions are how the server makes its CAs and how they sign.
func (c config) caOptions() caOptions {
	return caOptions{now: time.Now, notBefore: c.notBefore, age: time.Duration(c.caAgeYears) * year, chain: c.caChain}
}

// params are the scrypt parameters of new hashes: k3s's but for -logn.
func (c config) params() verify.Params {
	return verify.Params{LogN: c.logN, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
}

// checkAddr checks a host:port whose port is a number (0 to 65535).
func checkAddr(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// checkSAN checks a name for the server's certificate: an IP address, or
// a DNS name without wildcards (a certificate for *.example.com would
// stand in for every name under example.com).
func checkSAN(s string) error {
	if net.ParseIP(s) != nil {
		return nil
	}
	if strings.Contains(s, "*") {
		return errors.New("a wildcard; give each name")
	}
	if len(s) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("not a DNS name (labels of 1 to 63 letters, digits and inner hyphens)")
		}
		for _, r := range label {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-') {
				return fmt.Errorf("not a DNS name (%q)", r)
			}
		}
	}
	return nil
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}
