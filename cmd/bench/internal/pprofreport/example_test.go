package pprofreport_test

import (
	"fmt"

	"github.com/nodepass/nodepass/cmd/bench/internal/pprofreport"
)

// Classify sorts a sample by its stack, the leaf first: SHA-256 is the
// scrypt hot path under scrypt and the cache under a cache key.
func ExampleClassify() {
	for _, stack := range [][]string{
		{"crypto/internal/fips140/sha256.blockAVX2", "crypto/pbkdf2.Key", "golang.org/x/crypto/pbkdf2.Key", "golang.org/x/crypto/scrypt.Key"},
		{"crypto/internal/fips140/sha256.blockAVX2", "crypto/hmac.(*hmac).Sum", "github.com/nodepass/nodepass/cache.(*Cache).Key"},
		{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"},
		{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"},
		{"crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/tls.(*halfConn).encrypt"},
	} {
		fmt.Println(pprofreport.Classify(stack))
	}
	// Output:
	// scrypt
	// cache
	// gc
	// runtime
	// tls/http
}
