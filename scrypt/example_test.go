package scrypt_test

import (
	"crypto/subtle"
	"encoding/hex"
	"fmt"

	"github.com/nodepass/nodepass/scrypt"
)

func ExampleKey() {
	// RFC 7914's first test vector, N=16, r=1, p=1; k3s and RKE2 use
	// N=32768, r=8, p=1.
	key, err := scrypt.Key([]byte(""), []byte(""), 16, 1, 1, 64)
	if err != nil {
		panic(err)
	}
	fmt.Println(hex.EncodeToString(key[:16]))
	// Output: 77d6576238657b203b19ca42c18a0497
}

func ExampleKeyBatch() {
	// Two node passwords waiting to be verified, at k3s's parameters, and a
	// job with parameters scrypt rejects.
	stored := map[string]string{
		"node-a": "3b6d3c1d0ba4f0a26b3be9dd63ee3ad7",
		"node-b": "0f00",
	}
	jobs := []scrypt.Job{
		{Password: []byte("secret-a"), Salt: []byte("node-a"), N: 1 << 15, R: 8, P: 1, KeyLen: 16},
		{Password: []byte("secret-b"), Salt: []byte("node-b"), N: 1 << 15, R: 8, P: 1, KeyLen: 16},
		{Password: []byte("secret-c"), Salt: []byte("node-c"), N: 1000, R: 8, P: 1, KeyLen: 16},
	}
	scrypt.KeyBatch(jobs) // node-a and node-b share N and R: computed together
	for _, j := range jobs {
		if j.Err != nil {
			fmt.Printf("%s: %v\n", j.Salt, j.Err)
			continue
		}
		want, _ := hex.DecodeString(stored[string(j.Salt)])
		fmt.Printf("%s: match %v\n", j.Salt, subtle.ConstantTimeCompare(j.Key, want) == 1)
	}
}
