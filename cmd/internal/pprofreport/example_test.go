package pprofreport_test

import (
	"fmt"

	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
	"github.com/nodepass/nodepass/verify"
)

// Classify sorts a sample by verify's label, whatever its stack: the
// runtime zeroing scrypt's buffer on a computation's goroutine is scrypt
// work.
func ExampleClassify() {
	scrypt := map[string][]string{verify.ProfileLabel: {verify.ProfileScrypt}}
	fmt.Println(pprofreport.Classify([]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"}, scrypt))
	// Output:
	// scrypt
}

// Without a label, Classify sorts a sample by the packages on its stack,
// the leaf first: SHA-256 is scrypt's under scrypt and the cache's under
// a cache key.
func ExampleClassify_packages() {
	for _, stack := range [][]string{
		{"crypto/internal/fips140/sha256.blockAVX2", "crypto/pbkdf2.Key", "golang.org/x/crypto/pbkdf2.Key", "golang.org/x/crypto/scrypt.Key"},
		{"crypto/internal/fips140/sha256.blockAVX2", "crypto/hmac.(*hmac).Sum", "github.com/nodepass/nodepass/cache.(*Cache).Key"},
		{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"},
		{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"},
		{"crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/tls.(*halfConn).encrypt"},
	} {
		fmt.Println(pprofreport.Classify(stack, nil))
	}
	// Output:
	// scrypt
	// cache
	// gc
	// runtime
	// tls/http
}
