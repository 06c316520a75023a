package kube_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodepass/nodepass/kube"
	"github.com/nodepass/nodepass/verify"
)

// A Verifier over the node-password secrets of a k3s cluster. A server
// would pass a clientset made with kubernetes.NewForConfig instead of the
// fake one.
func Example() {
	ctx := context.Background()
	client := fake.NewClientset()

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

	sec, err := client.CoreV1().Secrets("kube-system").Get(ctx, "worker-1.node-password.k3s", metav1.GetOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("secret:", sec.Name, sec.Type, *sec.Immutable)
	// Output:
	// first join: <nil>
	// other password: verify: password does not match stored hash
	// secret: worker-1.node-password.k3s k3s.cattle.io/node-password true
}
