package kube_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/kube/kubefake"
	"github.com/nodepass/nodepass/verify"
)

// A Verifier over the node-password secrets of a k3s cluster. A server
// would pass clientset.CoreV1() of a clientset made with
// kubernetes.NewForConfig (or corev1client.NewForConfig) instead of the
// fake client.
func Example() {
	ctx := context.Background()
	client, err := kubefake.New()
	if err != nil {
		panic(err)
	}

	store, err := kube.New(client, &kube.Options{Program: "k3s"})
	if err != nil {
		panic(err)
	}
	if err := store.Start(ctx); err != nil {
		panic(err)
	}
	defer store.Close()

	// Small scrypt parameters keep the example fast; leave Params zero
	// for k3s's own.
	params := verify.Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}
	v, err := verify.New(store, &verify.Options{Params: params})
	if err != nil {
		panic(err)
	}
	defer v.Close()

	fmt.Println("first join:", v.Ensure(ctx, "Worker-1", "0123456789abcdef"))
	fmt.Println("other password:", v.Ensure(ctx, "worker-1", "fedcba9876543210"))

	sec, err := client.Secrets("kube-system").Get(ctx, "worker-1.node-password.k3s", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("secret:", sec.Name, sec.Type, *sec.Immutable)
	// Output:
	// first join: <nil>
	// other password: verify: password does not match stored hash
	// secret: worker-1.node-password.k3s k3s.cattle.io/node-password true
}
