package main

import (
	"context"
	"fmt"
	"log/slog"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/verify"
)

// Client-side rate limits for -store kube. The Store reads from its
// informer cache, so these bound only the Creates of first joins and the
// rare read-after-create GETs; client-go's default (5 QPS, burst 10) would
// make a herd of 300 new nodes wait a minute for their secrets.
const (
	kubeQPS   = 50
	kubeBurst = 100
)

// openStore returns the Store the flags ask for and a function that closes
// it. A kube Store is started and its cache synced before openStore
// returns; it runs until closed, so that requests still in flight during a
// graceful shutdown are answered.
func openStore(ctx context.Context, cfg config, log *slog.Logger) (verify.Store, func(), error) {
	if cfg.store == "memory" {
		log.Warn("server: hashes are kept in memory and lost on exit; use -store kube to keep them in Secrets")
		return verify.NewMemoryStore(), func() {}, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = cfg.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("server: kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = kubeQPS, kubeBurst
	client, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("server: Kubernetes client: %w", err)
	}
	s, err := kube.New(client, &kube.Options{Program: cfg.program, Namespace: cfg.namespace, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("server: %w", err)
	}
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("server: %w", err)
	}
	log.Info("server: waiting for the secret cache to sync", "host", rc.Host, "namespace", cfg.namespace)
	syncCtx, cancel := context.WithTimeout(ctx, cfg.syncTimeout)
	defer cancel()
	if err := s.WaitForSync(syncCtx); err != nil {
		s.Close()
		return nil, nil, fmt.Errorf("server: %w", err)
	}
	return s, func() { s.Close() }, nil
}
