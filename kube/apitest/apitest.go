// Package apitest starts a real kube-apiserver, over its own etcd, for
// tests of code that uses kube.Store. The binaries are built from pinned
// versions by the nested module tools/apiserver (`make apiserver` writes
// them to tools/apiserver/bin); this package only runs them, so it needs
// client-go and nothing of k8s.io/kubernetes.
//
// A Server listens on free loopback ports, keeps its data in a temporary
// directory, and hands out two identities: Admin (a cluster admin) and
// Node, the identity a nodepass server runs as, bound by RBAC to exactly
// the verbs in NodeVerbs on secrets in kube-system. Tests get one with
// [Start] (or [Shared] for one per test binary), which skips the test
// when the binaries are not there:
//
//	srv := apitest.Start(t) // skips unless $NODEPASS_APISERVER_BIN is set
//	client, _ := corev1client.NewForConfig(srv.Node)
//
// The processes run in their own process groups; Stop kills both groups
// and removes the directory. Kill and Restart take both down, as a crash
// would, and up again over the same data, for tests of outages. They are also stopped when the test process
// gets SIGINT or SIGTERM, and on Linux the kernel kills them if the test
// process dies without stopping them.
package apitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	rbacclient "k8s.io/client-go/kubernetes/typed/rbac/v1"
	"k8s.io/client-go/rest"
)

// BinEnv is the environment variable naming the directory that holds the
// etcd and kube-apiserver binaries.
const BinEnv = "NODEPASS_APISERVER_BIN"

// Namespace is where the Node identity may use secrets.
const Namespace = "kube-system"

// NodeVerbs are the verbs the Node identity has on secrets in Namespace:
// what the README says a nodepass server needs.
var NodeVerbs = []string{"get", "list", "watch", "create", "patch"}

// Names of the identities and of the RBAC objects that bind Node.
const (
	AdminUser = "nodepass-admin"
	NodeUser  = "nodepass-server"
	RoleName  = "nodepass-node-passwords"
)

// Options configure Run. The zero value means defaults.
type Options struct {
	// BinDir holds etcd and kube-apiserver. Default: $NODEPASS_APISERVER_BIN.
	BinDir string
	// Dir is where the servers keep their data, certificates and logs; it
	// is removed by Stop. Default: a new temporary directory.
	Dir string
	// ReadyTimeout bounds the wait for readyz. Default 2 min (on a busy
	// two-core machine kube-apiserver takes 20 to 60 s).
	ReadyTimeout time.Duration
}

// Server is a running etcd and kube-apiserver.
type Server struct {
	// URL is the API server's address, https://127.0.0.1:PORT.
	URL string
	// Admin is a cluster admin (group system:masters).
	Admin *rest.Config
	// Node is the nodepass server's identity: NodeVerbs on secrets in
	// Namespace and nothing else.
	Node *rest.Config
	// StartupTime is how long the servers took from start to readyz.
	StartupTime time.Duration

	dir          string
	ownDir       bool
	bin          string   // holds the binaries
	etcdArgs     []string // how Run started etcd, for Restart
	apiArgs      []string // and kube-apiserver
	certFile     string   // kube-apiserver's serving certificate
	ca           []byte   // certFile's PEM, which the clients trust
	adminToken   string
	readyTimeout time.Duration

	mu       sync.Mutex // guards procs and verbs
	procs    []*process // the running etcd and kube-apiserver, in start order
	verbs    []string   // what SetNodeVerbs last granted Node
	stopOnce sync.Once
	stopErr  error
}

// ErrNoBinaries is returned by Run when BinDir is empty or does not hold
// both binaries.
var ErrNoBinaries = errors.New("apitest: kube-apiserver and etcd binaries not found")

// BinDir checks that dir (when empty, $NODEPASS_APISERVER_BIN) holds
// both binaries and returns it made absolute, or an error wrapping
// ErrNoBinaries that says how to build them.
func BinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(BinEnv)
	}
	if dir == "" {
		return "", fmt.Errorf("%w: $%s is not set (run `make test-apiserver`, or `make apiserver` and set %s=tools/apiserver/bin)", ErrNoBinaries, BinEnv, BinEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("apitest: %w", err)
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(abs, b)); err != nil || fi.IsDir() {
			return "", fmt.Errorf("%w: no %s in %s (run `make apiserver`)", ErrNoBinaries, b, abs)
		}
	}
	return abs, nil
}

// Run starts etcd and kube-apiserver, waits until the API server is ready,
// and binds the Node identity. On error everything started is stopped.
// The caller must Stop the Server.
func Run(ctx context.Context, opts *Options) (_ *Server, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	bin, err := BinDir(o.BinDir)
	if err != nil {
		return nil, err
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	s := &Server{dir: o.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "nodepass-apiserver-"); err != nil {
			return nil, fmt.Errorf("apitest: %w", err)
		}
		s.ownDir = true
	}
	track(s)
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	began := time.Now()
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	etcdPeer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	s.URL = "https://127.0.0.1:" + strconv.Itoa(ports[2])

	adminToken, nodeToken := randomToken(), randomToken()
	tokens := filepath.Join(s.dir, "tokens.csv")
	csv := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n",
		adminToken, AdminUser, AdminUser, nodeToken, NodeUser, NodeUser)
	if err := os.WriteFile(tokens, []byte(csv), 0o600); err != nil {
		return nil, fmt.Errorf("apitest: %w", err)
	}
	saKey := filepath.Join(s.dir, "sa.key")
	if err := writeRSAKey(saKey); err != nil {
		return nil, err
	}
	certDir := filepath.Join(s.dir, "certs")

	s.bin, s.adminToken, s.readyTimeout = bin, adminToken, o.ReadyTimeout
	s.certFile = filepath.Join(certDir, "apiserver.crt")
	s.etcdArgs = []string{
		"--name=default",
		"--data-dir=" + filepath.Join(s.dir, "etcd"),
		"--listen-client-urls=" + etcdClient,
		"--advertise-client-urls=" + etcdClient,
		"--listen-peer-urls=" + etcdPeer,
		"--initial-advertise-peer-urls=" + etcdPeer,
		"--initial-cluster=default=" + etcdPeer,
		"--unsafe-no-fsync", // a throw-away test store
		"--log-level=warn",
	}
	s.apiArgs = []string{
		"--etcd-servers=" + etcdClient,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(ports[2]),
		"--cert-dir=" + certDir,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + saKey,
		"--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--anonymous-auth=false",
		"--v=0",
	}
	readyCtx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	if s.ca, err = s.launch(readyCtx); err != nil {
		return nil, err
	}
	s.Admin = s.config(s.ca, adminToken, AdminUser)
	s.Node = s.config(s.ca, nodeToken, NodeUser)
	if err := s.bindNode(readyCtx); err != nil {
		return nil, err
	}
	s.StartupTime = time.Since(began)
	return s, nil
}

// launch starts etcd and kube-apiserver and waits until the API server is
// ready; it returns the API server's certificate (PEM).
func (s *Server) launch(ctx context.Context) ([]byte, error) {
	api, err := s.startBoth()
	if err != nil {
		return nil, err
	}
	return s.waitReady(ctx, api)
}

// startBoth starts etcd, then kube-apiserver, which it returns.
func (s *Server) startBoth() (*process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = s.procs[:0]
	for _, b := range []struct {
		name string
		args []string
	}{{"etcd", s.etcdArgs}, {"kube-apiserver", s.apiArgs}} {
		p, err := startProcess(filepath.Join(s.bin, b.name), filepath.Join(s.dir, b.name+".log"), b.args...)
		if err != nil {
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	return s.procs[1], nil
}

// Kill kills kube-apiserver and etcd, as a crash would (SIGKILL to both
// process groups), and waits for them to exit. Their data, certificate
// and ports are kept for Restart; until then every request to the API
// server fails at once (connection refused).
func (s *Server) Kill() error {
	if err := s.killBoth(); err != nil {
		return fmt.Errorf("apitest: killing: %w", err)
	}
	return nil
}

// killBoth kills kube-apiserver, then etcd, and waits for them.
func (s *Server) killBoth() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range slices.Backward(s.procs) {
		errs = append(errs, p.kill())
	}
	return errors.Join(errs...)
}

// Restart starts etcd and kube-apiserver again after Kill, over the data
// they kept, at the same address, with the same certificate and
// identities, and returns once the API server is ready and the Node
// identity's verbs are in effect again. It must not be called while they
// run, nor after Stop.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	running := slices.ContainsFunc(s.procs, (*process).running)
	verbs := slices.Clone(s.verbs)
	s.mu.Unlock()
	if running {
		return errors.New("apitest: Restart while the servers run; Kill them first")
	}
	readyCtx, cancel := context.WithTimeout(ctx, s.readyTimeout)
	defer cancel()
	ca, err := s.launch(readyCtx)
	switch {
	case err != nil:
		return err
	case !bytes.Equal(ca, s.ca):
		return errors.New("apitest: kube-apiserver made itself a new certificate on Restart; its clients no longer trust it")
	}
	return s.waitVerbs(readyCtx, verbs)
}

// config returns a rest.Config for token, verifying the server's
// certificate against ca.
func (s *Server) config(ca []byte, token, user string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca, ServerName: "127.0.0.1"},
		UserAgent:       "nodepass-apitest/" + user,
		QPS:             -1, // no client-side rate limit: the tests measure the server
	}
}

// waitReady waits for the API server's certificate, then polls readyz
// until it answers 200, the API server exits, or ctx ends. It returns the
// certificate file's PEM, which the clients trust.
func (s *Server) waitReady(ctx context.Context, api *process) ([]byte, error) {
	var (
		ca     []byte
		client *http.Client
		last   = "no certificate yet"
	)
	for {
		if client == nil {
			if data, err := os.ReadFile(s.certFile); err == nil {
				pool := x509.NewCertPool()
				if pool.AppendCertsFromPEM(data) {
					ca = data
					tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}
					defer tr.CloseIdleConnections()
					client = &http.Client{Transport: tr, Timeout: 5 * time.Second}
				}
			}
		}
		if client != nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/readyz", nil)
			if err != nil {
				return nil, fmt.Errorf("apitest: %w", err)
			}
			req.Header.Set("Authorization", "Bearer "+s.adminToken)
			resp, err := client.Do(req)
			if err == nil {
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return ca, nil
				}
				last = fmt.Sprintf("readyz answered %d: %s", resp.StatusCode, bytes.TrimSpace(body))
			} else {
				last = err.Error()
			}
		}
		select {
		case <-api.done:
			return nil, fmt.Errorf("apitest: kube-apiserver exited before it was ready (%v); the logs end:\n%s", api.waitErr, s.logTail())
		case <-ctx.Done():
			return nil, fmt.Errorf("apitest: kube-apiserver not ready (%s): %w; the logs end:\n%s", last, context.Cause(ctx), s.logTail())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// bindNode makes the Role with NodeVerbs and binds it to NodeUser, and
// waits until the authorizer allows them.
func (s *Server) bindNode(ctx context.Context) error {
	core, err := corev1client.NewForConfig(s.Admin)
	if err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	// kube-system is made by a controller that readyz does not wait for.
	_, err = core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("apitest: creating namespace %s: %w", Namespace, err)
	}
	rbac, err := rbacclient.NewForConfig(s.Admin)
	if err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	_, err = rbac.RoleBindings(Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RoleName},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: NodeUser}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("apitest: binding role %s to %s: %w", RoleName, NodeUser, err)
	}
	return s.SetNodeVerbs(ctx, NodeVerbs...)
}

// checkedVerbs are the verbs on secrets that SetNodeVerbs checks the
// authorizer's answers for: every verb of the secrets API.
var checkedVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

// SetNodeVerbs makes the Node identity's Role grant exactly verbs on
// secrets in Namespace, and waits until the API server's authorizer
// allows those and denies every other verb on secrets (RBAC changes reach
// the authorizer through an informer, a moment after the write). Tests
// that change the verbs should restore NodeVerbs when done.
func (s *Server) SetNodeVerbs(ctx context.Context, verbs ...string) error {
	rbac, err := rbacclient.NewForConfig(s.Admin)
	if err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: RoleName, Namespace: Namespace},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"secrets"},
			Verbs:     slices.Clone(verbs),
		}},
	}
	old, err := rbac.Roles(Namespace).Get(ctx, RoleName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = rbac.Roles(Namespace).Create(ctx, role, metav1.CreateOptions{})
	case err == nil:
		role.ResourceVersion = old.ResourceVersion
		_, err = rbac.Roles(Namespace).Update(ctx, role, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("apitest: writing role %s: %w", RoleName, err)
	}
	s.mu.Lock()
	s.verbs = slices.Clone(verbs)
	s.mu.Unlock()
	return s.waitVerbs(ctx, verbs)
}

// waitVerbs polls SelfSubjectAccessReviews as Node until the answers
// match verbs.
func (s *Server) waitVerbs(ctx context.Context, verbs []string) error {
	az, err := authorizationclient.NewForConfig(s.Node)
	if err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	for {
		mismatch := ""
		for _, verb := range checkedVerbs {
			r, err := az.SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: Namespace, Verb: verb, Resource: "secrets",
				}},
			}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("apitest: access review for %s: %w", verb, err)
			}
			if r.Status.Allowed != slices.Contains(verbs, verb) {
				mismatch = fmt.Sprintf("%s allowed %v", verb, r.Status.Allowed)
				break
			}
		}
		if mismatch == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("apitest: RBAC for %s not in effect (%s): %w", NodeUser, mismatch, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop kills both processes' groups, waits for them, and removes the
// directory Run made. It is safe to call more than once.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		untrack(s)
		errs := []error{s.killBoth()}
		if s.ownDir {
			errs = append(errs, os.RemoveAll(s.dir))
		}
		if err := errors.Join(errs...); err != nil {
			s.stopErr = fmt.Errorf("apitest: stopping: %w", err)
		}
	})
	return s.stopErr
}

// Logs returns the tails of the servers' logs, for a failing test.
func (s *Server) Logs() string { return s.logTail() }

func (s *Server) logTail() string {
	var b bytes.Buffer
	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			continue
		}
		if len(data) > 4096 {
			data = data[len(data)-4096:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", name, data)
	}
	return b.String()
}

// process is a started server process in its own process group.
type process struct {
	cmd     *exec.Cmd
	log     *os.File
	done    chan struct{} // closed once Wait returned
	waitErr error
}

// startProcess starts path with args, appending its output to logPath.
func startProcess(path, logPath string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("apitest: %w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("apitest: starting %s: %w", filepath.Base(path), err)
	}
	p := &process{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill kills the process's group and waits for the process.
func (p *process) kill() error {
	if !p.running() {
		return nil // exited by itself
	}
	if err := killGroup(p.cmd.Process.Pid); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.cmd.Process.Kill()
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit after SIGKILL", filepath.Base(p.cmd.Path))
	}
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. They are free
// when returned; another process could take one before the servers bind
// it, which makes Run fail rather than use the wrong server.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("apitest: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() string {
	var b [24]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeRSAKey writes a new RSA key, PKCS #1 PEM, for signing and checking
// service account tokens.
func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("apitest: %w", err)
	}
	return nil
}

// live holds the running Servers, for the signal handler.
var live struct {
	sync.Mutex
	servers map[*Server]bool
	quit    chan struct{} // closed to end the handler when no Server runs
}

// track registers s for stopping on SIGINT or SIGTERM. While any Server
// runs, a handler stops every live Server on those signals and then lets
// the signal take its default course (the process exits).
func track(s *Server) {
	live.Lock()
	defer live.Unlock()
	if live.servers == nil {
		live.servers = make(map[*Server]bool)
	}
	live.servers[s] = true
	if live.quit != nil {
		return
	}
	quit := make(chan struct{})
	live.quit = quit
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		defer signal.Stop(ch)
		var sig os.Signal
		select {
		case <-quit:
			return
		case sig = <-ch:
		}
		live.Lock()
		servers := make([]*Server, 0, len(live.servers))
		for s := range live.servers {
			servers = append(servers, s)
		}
		live.Unlock()
		for _, s := range servers {
			s.Stop()
		}
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Signal(sig)
		}
	}()
}

// untrack forgets s, and ends the handler when no Server is left.
func untrack(s *Server) {
	live.Lock()
	defer live.Unlock()
	delete(live.servers, s)
	if len(live.servers) == 0 && live.quit != nil {
		close(live.quit)
		live.quit = nil
	}
}
