package verify_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nodepass/nodepass/verify"
)

func Example() {
	store := verify.NewMemoryStore() // or a kube.Store over Kubernetes Secrets
	v, err := verify.New(store, &verify.Options{
		Params: verify.Params{LogN: 10, R: 8, P: 1, KeyLen: 64, SaltLen: 8}, // k3s uses verify.DefaultParams
	})
	if err != nil {
		panic(err)
	}
	defer v.Close()
	ctx := context.Background()

	// First join: the node is enrolled under the password it sent.
	fmt.Println(v.Ensure(ctx, "worker-1", "0123456789abcdef0123456789abcdef"))
	// Its retries are answered from the cache.
	fmt.Println(v.Ensure(ctx, "worker-1", "0123456789abcdef0123456789abcdef"))
	// Another password for the same node is refused, without scrypt: the
	// node's verified password is known.
	err = v.Ensure(ctx, "worker-1", "guess")
	fmt.Println(errors.Is(err, verify.ErrMismatchedHashAndPassword))

	st := v.Stats()
	fmt.Println("scrypt runs:", st.ScryptRuns, "cache hits:", st.CacheHits)
	// Output:
	// <nil>
	// <nil>
	// true
	// scrypt runs: 1 cache hits: 2
}

func ExampleCompareHashAndPassword() {
	// A hash as k3s stores it in <node>.node-password.k3s.
	hash := "$1:0011223344556677:10:8:1:WK+zTLeAqKDLOUG9SktsJwf2m/PxrV5V7gcXr2wR7JNLtwkoGh3qJig7mhKaL3ZU9GqTxvEYrrf0TGiMR6i07Q"
	fmt.Println(verify.CompareHashAndPassword(hash, ""))
	fmt.Println(verify.CompareHashAndPassword(hash, "guess"))
	fmt.Println(verify.CompareHashAndPassword("$1:00:40:8:1:AAAA", ""))
	// Output:
	// <nil>
	// verify: password does not match stored hash
	// verify: invalid hash: logN 40 out of range 1..30
}

func ExampleOverloadError() {
	var err error = &verify.OverloadError{After: 2500 * time.Millisecond, Queued: true}
	var retry interface{ RetryAfter() time.Duration }
	if errors.Is(err, verify.ErrOverloaded) && errors.As(err, &retry) {
		fmt.Println("come back in", retry.RetryAfter())
	}
	// Output: come back in 2.5s
}
