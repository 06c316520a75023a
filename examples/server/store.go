package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodepass/nodepass/examples/internal/cli"
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

// errDataDirShared is lockDataDir's answer when dataDir is locked the
// other way: by a -store memory server, or by others when this one has
// -store memory.
var errDataDirShared = errors.New("server: -data-dir is shared")

// memoryNotShared says why -store memory cannot serve with other servers.
const memoryNotShared = "node passwords in memory are not shared, so a node enrolled on one server could get its certificates from another under another password; give every server -store dir (servers on one machine) or -store kube"

// lockServers locks cfg's -data-dir (see lockDataDir) and refuses, as a
// usage error, a -data-dir shared with a -store memory server.
func lockServers(cfg config) (func(), error) {
	if cfg.dataDir == "" {
		return func() {}, nil
	}
	unlock, err := lockDataDir(cfg.dataDir, cfg.store == "memory")
	switch {
	case errors.Is(err, errDataDirShared) && cfg.store == "memory":
		return nil, cli.Usagef("server: -store memory: another server uses -data-dir %s; %s", cfg.dataDir, memoryNotShared)
	case errors.Is(err, errDataDirShared):
		return nil, cli.Usagef("server: -data-dir %s is used by a server with -store memory, which does not share node passwords; restart it with -store dir or -store kube", cfg.dataDir)
	}
	return unlock, err
}

// openStore returns the Store the flags ask for and a function that closes
// it. A kube Store is started and its cache synced before openStore
// returns; it runs until closed, so that requests still in flight during a
// graceful shutdown are answered. Where the hashes are kept is logged
// once the server is ready (logStore), so that a failure at start is one
// line.
func openStore(ctx context.Context, cfg config, log *slog.Logger) (verify.DigestStore, func(), error) {
	switch cfg.store {
	case "memory":
		return verify.NewMemoryStore(), func() {}, nil
	case "dir":
		s, err := openDirStore(cfg.storeDir, cfg.program)
		if err != nil {
			return nil, nil, err
		}
		return s, func() {}, nil
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

// logStore says where the hashes are kept, with the server's ready line.
// The memory store is safe where it runs (it refuses to run beside other
// servers), so its line is no warning, and says only what the default
// means: the ready line's store=memory tells a user who chose it.
func logStore(cfg config, log *slog.Logger) {
	switch cfg.store {
	case "memory":
		if !cfg.storeSet {
			log.Info("server: hashes are kept in memory (the default -store): lost on exit, and seen by no other server; -store dir or -store kube keeps them")
		}
	case "dir":
		log.Info("server: hashes are kept in files", "dir", cfg.storeDir)
	}
}
