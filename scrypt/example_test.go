package scrypt_test

import (
	"crypto/rand"
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
	// Two nodes enrolled with a random salt each (k3s's N=32768 made
	// smaller here), then a batch: node-a's password, a wrong one for
	// node-b, and a job with parameters scrypt rejects.
	const N, r, p, keyLen = 1 << 10, 8, 1, 16
	salts := map[string][]byte{"node-a": make([]byte, 8), "node-b": make([]byte, 8)}
	stored := map[string][]byte{}
	for node, salt := range salts {
		rand.Read(salt)
		stored[node], _ = scrypt.Key([]byte("secret-"+node), salt, N, r, p, keyLen)
	}
	names := []string{"node-a", "node-b", "node-c"}
	jobs := []scrypt.Job{
		{Password: []byte("secret-node-a"), Salt: salts["node-a"], N: N, R: r, P: p, KeyLen: keyLen},
		{Password: []byte("a guess"), Salt: salts["node-b"], N: N, R: r, P: p, KeyLen: keyLen},
		{Password: []byte("secret-node-c"), Salt: []byte("any"), N: 1000, R: r, P: p, KeyLen: keyLen},
	}
	scrypt.KeyBatch(jobs) // node-a's and node-b's share N and R: computed together
	for i, j := range jobs {
		if j.Err != nil {
			fmt.Printf("%s: %v\n", names[i], j.Err)
			continue
		}
		fmt.Printf("%s: match %v\n", names[i], subtle.ConstantTimeCompare(j.Key, stored[names[i]]) == 1)
	}
	// Output:
	// node-a: match true
	// node-b: match false
	// node-c: scrypt: N must be > 1 and a power of 2
}
