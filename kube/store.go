package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/nodepass/nodepass/internal/dnsname"
	"github.com/nodepass/nodepass/verify"
)

// HashKey is the data key of a node-password secret that holds the hash.
const HashKey = "hash"

// Store is a [verify.Store] over the node-password secrets of k3s or
// RKE2 (see the package doc). It is safe for concurrent use. Make one
// with New, Start it before the first Get, and Close it to stop its
// informer; the zero value is not usable.
type Store struct {
	secrets corev1client.SecretInterface // of Options.Namespace
	opts    Options
	suffix  string // ".node-password." + Program
	typ     corev1.SecretType

	informer cache.SharedIndexInformer
	lister   corelisters.SecretNamespaceLister
	synced   <-chan struct{} // closed once the informer cache has synced

	run     context.Context // the informer's; cancelled by Close
	cancel  context.CancelFunc
	started atomic.Bool
	mu      sync.Mutex     // serialises Start and Close
	unlink  func() bool    // stops Start's ctx from cancelling run
	wg      sync.WaitGroup // the informer's goroutine

	// recent holds the secret names this Store created or was told exist,
	// each for Options.ReadAfterCreate (addRecent, isRecent).
	recent *utilcache.Expiring
	reads  *rate.Limiter // GetFresh's direct reads
	writes *rate.Limiter // RememberDigest's patches
}

// New returns a Store over the secrets client can read and write: pass
// clientset.CoreV1() of a kubernetes.Clientset (the core/v1 client keeps
// the other API groups out of the build). opts may be nil for the
// defaults. The Store's informer, its own since its transform strips
// every secret, does not run until Start.
func New(client corev1client.SecretsGetter, opts *Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("kube: nil client")
	}
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	s := &Store{
		secrets: client.Secrets(o.Namespace),
		opts:    o,
		suffix:  ".node-password." + o.Program,
		typ:     corev1.SecretType(o.Program + ".cattle.io/node-password"),
		recent:  utilcache.NewExpiring(),
		reads:   newLimiter(o.FreshReads),
		writes:  newLimiter(o.DigestWrites),
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return s.secrets.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return s.secrets.Watch(ctx, opts)
		},
	}
	s.informer = cache.NewSharedIndexInformerWithOptions(
		cache.ToListWatcherWithWatchListSemantics(lw, client),
		&corev1.Secret{},
		cache.SharedIndexInformerOptions{ObjectDescription: "node-password secrets in " + o.Namespace})
	if err := s.informer.SetTransform(s.transform); err != nil {
		return nil, fmt.Errorf("kube: %w", err)
	}
	s.synced = s.informer.HasSyncedChecker().Done()
	s.lister = corelisters.NewSecretLister(s.informer.GetIndexer()).Secrets(o.Namespace)
	s.run, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// newLimiter allows perSecond calls per second, in bursts of twice as
// many and at least one: a burst of 0 would allow none at all.
func newLimiter(perSecond float64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(perSecond), max(1, int(2*perSecond)))
}

// Start starts the Store's informer in the background and returns at once;
// it does not wait for the cache to sync (Get does, see Get). The informer
// runs until ctx ends or Close is called, whichever comes first; after
// that Get fails. Start fails if called twice or after Close.
//
// To keep answering the requests still in flight during a graceful
// shutdown, start the Store with a context that outlives the HTTP server
// and Close it after the server has shut down.
func (s *Store) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.started.Load():
		return errors.New("kube: Store already started")
	case s.run.Err() != nil:
		return errors.New("kube: Start after Close")
	}
	s.started.Store(true)
	s.unlink = context.AfterFunc(ctx, s.cancel)
	// client-go logs through the logr logger in its context.
	run := klog.NewContext(s.run, logr.FromSlogHandler(s.opts.Logger.Handler()))
	s.wg.Go(func() { s.informer.RunWithContext(run) })
	return nil
}

// Close stops the informer and waits for its goroutines to exit. Later
// calls to Get and Start fail; Create still works. Close is safe to call
// more than once, and before Start.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unlink != nil {
		s.unlink()
	}
	s.cancel()
	s.wg.Wait()
	return nil
}

// HasSynced reports whether the informer cache has synced: from then on
// Get answers from memory.
func (s *Store) HasSynced() bool { return s.informer.HasSynced() }

// WaitForSync blocks until the informer cache has synced, ctx ends or the
// Store stops. It returns nil once synced, and otherwise says why not.
// Servers may call it before they start listening; Get does it by itself.
func (s *Store) WaitForSync(ctx context.Context) error {
	switch {
	case !s.started.Load():
		return errors.New("kube: Store used before Start")
	case s.HasSynced(): // before a ctx that has ended too
		return nil
	}
	select {
	case <-s.synced:
		return nil
	case <-s.run.Done():
		return errors.New("kube: Store stopped before its secret cache synced")
	case <-ctx.Done():
		return fmt.Errorf("kube: waiting for the secret cache of namespace %s to sync: %w", s.opts.Namespace, context.Cause(ctx))
	}
}

// Get returns node's stored hash from the informer cache, once synced:
// it waits for the sync within ctx, never answering ErrNotFound from an
// empty cache. A miss within Options.ReadAfterCreate of a Create is
// checked with a direct GET.
//
// Errors wrap [verify.ErrNotFound] when the node has no secret (a deleted
// secret lets the node enroll again, as in k3s), [verify.ErrInvalidHash]
// when its secret has no "hash" data (such a node must not re-enroll), and
// [verify.ErrInvalidInput] when the node name cannot name a secret. Get
// fails before Start and after the Store has stopped.
func (s *Store) Get(ctx context.Context, node string) (string, error) {
	sec, err := s.secret(ctx, node)
	if err != nil {
		return "", err
	}
	return s.hashOf(sec)
}

// secret returns node's secret as Get finds it (see Get). The informer's
// copy is shared: it must not be modified.
func (s *Store) secret(ctx context.Context, node string) (*corev1.Secret, error) {
	name, err := s.SecretName(node)
	if err != nil {
		return nil, err
	}
	sec, err := s.cached(ctx, name)
	if !errors.Is(err, verify.ErrNotFound) || !s.isRecent(name) {
		return sec, err
	}
	s.opts.Logger.Debug("kube: secret created moments ago is not in the cache yet; reading it from the API server",
		slog.String("namespace", s.opts.Namespace), slog.String("secret", name))
	return s.direct(ctx, name)
}

// cached returns the secret called name from the informer cache, once
// the cache has synced (see Get).
func (s *Store) cached(ctx context.Context, name string) (*corev1.Secret, error) {
	if err := s.WaitForSync(ctx); err != nil {
		return nil, err
	}
	if s.run.Err() != nil {
		return nil, errors.New("kube: Store stopped")
	}
	sec, err := s.lister.Get(name)
	switch {
	case err == nil:
		return sec, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("kube: secret %s/%s: %w", s.opts.Namespace, name, verify.ErrNotFound)
	default:
		return nil, fmt.Errorf("kube: reading secret %s/%s from the cache: %w", s.opts.Namespace, name, err)
	}
}

// addRecent and isRecent keep and read name in s.recent: the informer
// cache learns of a new secret one watch event after the API server, and
// until then a miss on a recent name is read from the API server rather
// than answered ErrNotFound, which would let the node enroll twice.
func (s *Store) addRecent(name string) { s.recent.Set(name, nil, s.opts.ReadAfterCreate) }

func (s *Store) isRecent(name string) bool {
	_, ok := s.recent.Get(name)
	return ok
}

// direct reads the secret called name from the API server.
func (s *Store) direct(ctx context.Context, name string) (*corev1.Secret, error) {
	sec, err := s.secrets.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("kube: secret %s/%s: %w", s.opts.Namespace, name, verify.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("kube: getting secret %s/%s: %w", s.opts.Namespace, name, err)
	}
	return sec, nil
}

// GetFresh is Get with a cache miss confirmed by a direct read from the
// API server (verify.FreshGetter), at most Options.FreshReads of them per
// second, those within Options.ReadAfterCreate of a Create apart. Past
// that budget a miss wraps both [verify.ErrNotFound] and
// [verify.ErrNotFresh]: another server may have created the secret
// moments ago.
func (s *Store) GetFresh(ctx context.Context, node string) (string, error) {
	name, err := s.SecretName(node)
	if err != nil {
		return "", err
	}
	sec, err := s.cached(ctx, name)
	switch {
	case err == nil:
		return s.hashOf(sec)
	case !errors.Is(err, verify.ErrNotFound):
		return "", err
	case !s.isRecent(name) && !s.reads.Allow():
		return "", fmt.Errorf("kube: secret %s/%s is not in the cache, and the direct reads of Options.FreshReads are spent: %w (%w)",
			s.opts.Namespace, name, verify.ErrNotFound, verify.ErrNotFresh)
	}
	if sec, err = s.direct(ctx, name); err != nil {
		return "", err
	}
	s.opts.Logger.Debug("kube: direct read before enrolling found a secret the cache has not seen yet",
		slog.String("namespace", s.opts.Namespace), slog.String("secret", name))
	s.addRecent(name) // the cache is behind on this name
	return s.hashOf(sec)
}

// Create stores hash for node in a new immutable secret of type
// <program>.cattle.io/node-password. It returns an error wrapping
// [verify.ErrExists] when the API server answers AlreadyExists (the
// secret exists, whatever its type), and other API errors wrapped, with
// the node name and secret. Such an error says nothing of whether the
// secret exists: the API server admits a create (RBAC, admission
// policies and webhooks) before it looks for the name, so a refused
// create of an existing secret is Forbidden, not AlreadyExists; GetFresh
// tells. ctx bounds the API call. Create does not need Start.
func (s *Store) Create(ctx context.Context, node, hash string) error {
	name, err := s.SecretName(node)
	if err != nil {
		return err
	}
	if hash == "" {
		return fmt.Errorf("kube: empty hash for node %q", node)
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.opts.Namespace},
		Immutable:  ptr.To(true),
		Type:       s.typ,
		Data:       map[string][]byte{HashKey: []byte(hash)},
	}
	_, err = s.secrets.Create(ctx, sec, metav1.CreateOptions{})
	switch {
	case err == nil:
		s.addRecent(name)
		return nil
	case apierrors.IsAlreadyExists(err):
		s.addRecent(name)
		return fmt.Errorf("kube: secret %s/%s: %w", s.opts.Namespace, name, verify.ErrExists)
	default:
		return fmt.Errorf("kube: creating secret %s/%s: %w", s.opts.Namespace, name, err)
	}
}

var _ verify.FreshGetter = (*Store)(nil)

// SecretName returns the name of node's secret:
// strings.ToLower(node + ".node-password." + program). It fails, wrapping
// [verify.ErrInvalidInput], when that is not a valid secret name.
func (s *Store) SecretName(node string) (string, error) {
	if node == "" {
		return "", fmt.Errorf("kube: empty node name: %w", verify.ErrInvalidInput)
	}
	name := strings.ToLower(node + s.suffix)
	if !dnsname.Subdomain(name) {
		// The slow check, for its explanation.
		errs := validation.IsDNS1123Subdomain(name)
		return "", fmt.Errorf("kube: node name %q does not make a valid secret name: %s: %w",
			node, strings.Join(errs, "; "), verify.ErrInvalidInput)
	}
	return name, nil
}

// hashOf returns the hash held in sec. A secret without one is an error,
// not ErrNotFound: answering ErrNotFound would let anyone enroll the node
// again under a new password.
func (s *Store) hashOf(sec *corev1.Secret) (string, error) {
	h := sec.Data[HashKey]
	if len(h) == 0 {
		return "", fmt.Errorf("kube: secret %s/%s has no %q data: %w", sec.Namespace, sec.Name, HashKey, verify.ErrInvalidHash)
	}
	return string(h), nil
}

// transform is the informer's transform: it keeps of each secret only
// what the package doc lists (an informer cannot drop an object, so a
// small stub stands in for a secret that is not a node's). It is
// idempotent, as client-go asks.
func (s *Store) transform(obj any) (any, error) {
	sec, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name:            sec.Name,
		Namespace:       sec.Namespace,
		ResourceVersion: sec.ResourceVersion,
	}}
	if strings.HasSuffix(sec.Name, s.suffix) {
		slim.UID = sec.UID
		if d, ok := sec.Annotations[DigestAnnotation]; ok {
			slim.Annotations = map[string]string{DigestAnnotation: d}
		}
		slim.Type = sec.Type
		if h, ok := sec.Data[HashKey]; ok {
			slim.Data = map[string][]byte{HashKey: append([]byte(nil), h...)}
		}
	}
	return slim, nil
}
