// Command consumer is a module outside nodepass's repository that requires
// its library modules as another project would: modcheck builds it with
// GOWORK=off through a module proxy of the tree, then runs it. It wires
// what a k3s server adopts (the Hasher, the Verifier over Secrets, the
// metrics, the HTTP middleware, the agent) and checks a hash k3s made.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodepass/nodepass/agent"
	"github.com/nodepass/nodepass/httpauth"
	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/prom"
	"github.com/nodepass/nodepass/verify"
)

// A hash in k3s's format at k3s's parameters, computed by an independent
// scrypt implementation (verify/testdata/k3s_vectors.json).
const (
	k3sHash     = "$1:0001020304050607:15:8:1:kg9Jrz3bATlkXiCqL7d8SkSTs/2HeiPYnoI/BbhQCduby3WCOic74e71wmS0W2Hwv33if/xVbwSOfHTMwZY5Xg"
	k3sPassword = "hello world"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
	fmt.Println("consumer: ok")
}

func run(ctx context.Context) error {
	h, err := verify.NewHasher(nil)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.VerifyHash(k3sHash, k3sPassword); err != nil {
		return fmt.Errorf("a hash k3s made: %w", err)
	}
	if err := h.VerifyHash(k3sHash, "wrong"); err == nil {
		return fmt.Errorf("a wrong password was accepted")
	}

	store, err := kube.New(fake.NewClientset().CoreV1(), &kube.Options{Program: "k3s"})
	if err != nil {
		return err
	}
	defer store.Close()
	metrics, err := prom.New(nil)
	if err != nil {
		return err
	}
	v, err := verify.New(store, &verify.Options{Observer: metrics})
	if err != nil {
		return err
	}
	defer v.Close()
	if err := metrics.Attach(v); err != nil {
		return err
	}
	if _, err := httpauth.New(v, &httpauth.Options{Program: "k3s", Tokens: v}); err != nil {
		return err
	}
	_, err = agent.New(&agent.Options{Server: "https://127.0.0.1:9345", Token: "K10" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" + "::server:secret", NodeName: "consumer", DataDir: os.TempDir()})
	return err
}
