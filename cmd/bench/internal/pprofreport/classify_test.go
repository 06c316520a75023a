package pprofreport

import "testing"

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		frames []string
		want   Category
	}{
		{scryptStack, Scrypt},
		// SHA-256 and HMAC under pbkdf2 under scrypt.
		{[]string{"crypto/internal/fips140/sha256.blockAVX2", "crypto/internal/fips140/hmac.(*HMAC).Write",
			"crypto/internal/fips140/pbkdf2.Key[go.shape.*uint8]", "crypto/pbkdf2.Key[go.shape.*uint8]",
			"golang.org/x/crypto/pbkdf2.Key", "golang.org/x/crypto/scrypt.Key"}, Scrypt},
		// The same HMAC-SHA256, for a cache key.
		{cacheStack, Cache},
		// Library code called from the module is the module's.
		{[]string{"sync.(*Mutex).Lock", "github.com/nodepass/nodepass/verify.(*admission).enqueue"}, Admission},
		{[]string{"github.com/hashicorp/golang-lru/v2/simplelru.(*LRU[go.shape.[32]uint8,go.shape.int64]).Add",
			"github.com/nodepass/nodepass/cache.(*Cache).PutMatch", "github.com/nodepass/nodepass/verify.(*Verifier).recordMatch"}, Cache},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).share.func1"}, Flights},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).await"}, Flights},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).withSlot"}, Admission},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).runSlot"}, Admission},
		{[]string{"github.com/nodepass/nodepass/verify.(*admission).sortLocked"}, Admission},
		{[]string{"github.com/nodepass/nodepass/verify.newAdmission"}, Admission},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).known"}, Cache},
		{[]string{"github.com/nodepass/nodepass/verify.(*failures).mismatch"}, Admission},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).lookup"}, Cache},
		{[]string{"github.com/nodepass/nodepass/verify.parseHash"}, Verify},
		{[]string{"github.com/nodepass/nodepass/verify.Limits.CompareHashAndPassword"}, Verify},
		{[]string{"github.com/nodepass/nodepass/verify.(*Verifier).Ensure"}, Verify},
		{[]string{"net/textproto.CanonicalMIMEHeaderKey", "net/http.Header.Get", "github.com/nodepass/nodepass/httpauth.(*Auth).parse"}, TLSHTTP},
		{[]string{"strings.ToLower", "github.com/nodepass/nodepass/httpauth.(*Auth).parse"}, HTTPAuth},
		// TLS: AES-GCM under crypto/tls, ECDSA in a handshake, HTTP/2.
		{[]string{"crypto/internal/fips140/aes/gcm.gcmAesEnc", "crypto/internal/fips140/aes/gcm.(*GCM).Seal", "crypto/tls.(*halfConn).encrypt"}, TLSHTTP},
		{[]string{"crypto/internal/fips140/nistec.p256OrdSqr", "crypto/ecdsa.VerifyASN1", "crypto/tls.(*Conn).verifyServerCertificate"}, TLSHTTP},
		{[]string{"net/http.(*http2Framer).ReadFrame", "net/http.(*http2serverConn).readFrames"}, TLSHTTP},
		{[]string{"vendor/golang.org/x/net/http2/hpack.(*Decoder).Write", "net/http.(*http2Framer).readMetaFrame"}, TLSHTTP},
		{[]string{"syscall.Syscall6", "internal/poll.(*FD).Write", "net.(*conn).Write"}, TLSHTTP},
		// crypto with no owner: the CA made at start.
		{[]string{"crypto/internal/fips140/nistec.(*P256Point).ScalarBaseMult", "crypto/ecdsa.GenerateKey", "github.com/nodepass/nodepass/bench.newCA"}, TLSHTTP},
		// The runtime, by its own frames only.
		{gcStack, GC},
		{[]string{"runtime.scanSpanPacked", "internal/runtime/gc/scan.scanSpanPackedAVX512", "runtime.gcDrain"}, GC},
		{[]string{"internal/runtime/gc/scan.scanSpanPackedAVX512", "runtime.scanSpan", "runtime.gcDrainN", "runtime.gcAssistAlloc1",
			"runtime.gcAssistAlloc", "runtime.mallocgc", "github.com/nodepass/nodepass/bench.(*run).agent"}, GC},
		{[]string{"runtime.(*sweepLocked).sweep", "runtime.(*mcentral).cacheSpan", "runtime.mallocgc", "golang.org/x/crypto/scrypt.Key"}, GC},
		{runtimeStack, Runtime},
		{[]string{"runtime.memmove", "golang.org/x/crypto/scrypt.smix"}, Runtime},
		{[]string{"runtime.futex", "runtime.notesleep", "runtime.stopm", "runtime.schedule"}, Runtime},
		{[]string{"internal/runtime/maps.(*Map).getWithKeySmall", "runtime.mapaccess2"}, Runtime},
		// Everything else.
		{agentStack, Other},
		{[]string{"time.Now", "github.com/nodepass/nodepass/bench.(*run).sample"}, Other},
		{[]string{"runtime/pprof.(*profileBuilder).build", "runtime/pprof.profileWriter"}, Other},
		{nil, Other},
	} {
		if got := Classify(c.frames); got != c.want {
			t.Errorf("Classify(%q) = %v, want %v", c.frames, got, c.want)
		}
	}
}

func TestPkgOf(t *testing.T) {
	for in, want := range map[string]string{
		"runtime.mallocgc":               "runtime",
		"golang.org/x/crypto/scrypt.Key": "golang.org/x/crypto/scrypt",
		"github.com/nodepass/nodepass/verify.(*Verifier).share.func1":                                           "github.com/nodepass/nodepass/verify",
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
	for _, c := range Categories() {
		name := c.String()
		if name == "" || name == "unknown" || seen[name] {
			t.Errorf("category %d: name %q", c, name)
		}
		seen[name] = true
		if c.IsOwn() != (c >= Cache && c <= Verify) {
			t.Errorf("%v.IsOwn() = %v", c, c.IsOwn())
		}
	}
	if Category(-1).String() != "unknown" || numCategories.String() != "unknown" {
		t.Error("out-of-range categories have names")
	}
}
