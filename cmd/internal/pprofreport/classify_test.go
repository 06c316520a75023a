package pprofreport

import (
	"testing"

	"github.com/nodepass/nodepass/verify"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		frames []string
		labels map[string][]string
		want   Category
	}{
		// By verify's label, whatever the stack: scrypt itself, the
		// runtime zeroing its buffer and a GC assist it pays.
		{scryptStack.frames, scryptStack.labels, Scrypt},
		{zeroStack.frames, zeroStack.labels, Scrypt},
		{assistStack.frames, assistStack.labels, Scrypt},
		{[]string{"runtime.futex", "runtime.notesleep"}, scryptLabel, Scrypt},
		{nil, scryptLabel, Scrypt},
		{waitStack.frames, waitStack.labels, Request},
		{[]string{"runtime.mallocgc", "github.com/nodepass/nodepass/verify.(*Verifier).Ensure"}, requestLabel, Request},
		// Other labels (bench's) do not decide.
		{agentStack.frames, map[string][]string{"nodepass.bench.password": {"guess"}}, Other},
		{[]string{"runtime.mallocgc"}, map[string][]string{verify.ProfileLabel: {"something new"}}, Runtime},
		// Without labels, by package paths: scrypt (a profile made before
		// the labels), SHA-256 and HMAC under pbkdf2 under scrypt.
		{scryptStack.frames, nil, Scrypt},
		{[]string{"crypto/internal/fips140/sha256.blockAVX2", "crypto/internal/fips140/hmac.(*HMAC).Write",
			"crypto/internal/fips140/pbkdf2.Key[go.shape.*uint8]", "crypto/pbkdf2.Key[go.shape.*uint8]",
			"golang.org/x/crypto/pbkdf2.Key", "golang.org/x/crypto/scrypt.Key"}, nil, Scrypt},
		// The runtime's work under scrypt, unlabelled, stays the runtime's.
		{zeroStack.frames, nil, Runtime},
		{assistStack.frames, nil, GC},
		// The same HMAC-SHA256, for a cache key.
		{cacheStack.frames, nil, Cache},
		// Library code called from the module is the module's.
		{[]string{"sync.(*Mutex).Lock", "github.com/nodepass/nodepass/verify.(*Verifier).Verify"}, nil, Verify},
		{[]string{"github.com/hashicorp/golang-lru/v2/simplelru.(*LRU[go.shape.[32]uint8,go.shape.int64]).Add",
			"github.com/nodepass/nodepass/cache.(*Cache).PutMatch", "github.com/nodepass/nodepass/verify.(*Verifier).Verify"}, nil, Cache},
		{[]string{"github.com/nodepass/nodepass/verify.Limits.CompareHashAndPassword"}, nil, Verify},
		{[]string{"github.com/nodepass/nodepass/verify.(*OverloadError).Error"}, nil, Verify},
		{[]string{"net/textproto.CanonicalMIMEHeaderKey", "net/http.Header.Get", "github.com/nodepass/nodepass/httpauth.(*Auth).parse"}, nil, TLSHTTP},
		{[]string{"strings.ToLower", "github.com/nodepass/nodepass/httpauth.(*Auth).parse"}, nil, HTTPAuth},
		// TLS: AES-GCM under crypto/tls, ECDSA in a handshake, HTTP/2.
		{[]string{"crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/internal/fips140/aes/gcm.(*GCM).Seal", "crypto/tls.(*halfConn).encrypt"}, nil, TLSHTTP},
		{[]string{"crypto/internal/fips140/nistec.p256OrdSqr", "crypto/ecdsa.VerifyASN1", "crypto/tls.(*Conn).verifyServerCertificate"}, nil, TLSHTTP},
		{[]string{"net/http.(*http2Framer).ReadFrame", "net/http.(*http2serverConn).readFrames"}, nil, TLSHTTP},
		{[]string{"vendor/golang.org/x/net/http2/hpack.(*Decoder).Write", "net/http.(*http2Framer).readMetaFrame"}, nil, TLSHTTP},
		{[]string{"syscall.Syscall6", "internal/poll.(*FD).Write", "net.(*conn).Write"}, nil, TLSHTTP},
		// crypto with no owner: the CA made at start.
		{[]string{"crypto/internal/fips140/nistec.(*P256Point).ScalarBaseMult", "crypto/ecdsa.GenerateKey", "github.com/nodepass/nodepass/bench.newCA"}, nil, TLSHTTP},
		// The runtime, by its own frames only.
		{gcStack.frames, nil, GC},
		{[]string{"runtime.scanSpanPacked", "internal/runtime/gc/scan.scanSpanPackedAVX512", "runtime.gcDrain"}, nil, GC},
		{[]string{"internal/runtime/gc/scan.scanSpanPackedAVX512", "runtime.scanSpan", "runtime.gcDrainN", "runtime.gcAssistAlloc1",
			"runtime.gcAssistAlloc", "runtime.mallocgc", "github.com/nodepass/nodepass/bench.(*run).agent"}, nil, GC},
		{[]string{"runtime.(*sweepLocked).sweep", "runtime.(*mcentral).cacheSpan", "runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"}, nil, GC},
		{[]string{"runtime.memmove", "golang.org/x/crypto/scrypt.smix"}, nil, Runtime},
		{schedStack.frames, nil, Runtime},
		{[]string{"internal/runtime/maps.(*Map).getWithKeySmall", "runtime.mapaccess2"}, nil, Runtime},
		// Everything else.
		{agentStack.frames, nil, Other},
		{[]string{"time.Now", "github.com/nodepass/nodepass/bench.(*run).sample"}, nil, Other},
		{[]string{"runtime/pprof.(*profileBuilder).build", "runtime/pprof.profileWriter"}, nil, Other},
		{nil, nil, Other},
	} {
		if got := Classify(c.frames, c.labels); got != c.want {
			t.Errorf("Classify(%q, %v) = %v, want %v", c.frames, c.labels, got, c.want)
		}
	}
}

func TestPkgOf(t *testing.T) {
	for in, want := range map[string]string{
		"runtime.mallocgc":               "runtime",
		"golang.org/x/crypto/scrypt.Key": "golang.org/x/crypto/scrypt",
		"github.com/nodepass/nodepass/verify.(*Verifier).Verify.func1":                                          "github.com/nodepass/nodepass/verify",
		"github.com/hashicorp/golang-lru/v2/simplelru.(*LRU[github.com/nodepass/nodepass/cache.Key,int64]).Get": "github.com/hashicorp/golang-lru/v2/simplelru",
		"slices.SortFunc[go.shape.[]string,go.shape.string]":                                                    "slices",
		"crypto/internal/fips140/sha256.blockAVX2":                                                              "crypto/internal/fips140/sha256",
		"net/http.(*http2serverConn).serve":                                                                     "net/http",
		"vendor/golang.org/x/net/http2/hpack.huffmanDecode":                                                     "vendor/golang.org/x/net/http2/hpack",
	} {
		if got := pkgOf(in); got != want {
			t.Errorf("pkgOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCategoryNames(t *testing.T) {
	seen := map[string]bool{}
	for c := range numCategories {
		name := c.String()
		if name == "" || name == "unknown" || seen[name] {
			t.Errorf("category %d: name %q", c, name)
		}
		seen[name] = true
	}
	if Category(-1).String() != "unknown" || numCategories.String() != "unknown" {
		t.Error("out-of-range categories have names")
	}
}
