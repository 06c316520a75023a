package verify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	xscrypt "golang.org/x/crypto/scrypt"
)

// The equivalent keys of scrypt's HMAC. x/crypto's scrypt (what k3s's
// pkg/authenticator/hash/scrypt.go calls) derives one key from each of
// these passwords and the others of its class, and k3s accepts each for
// the others' hash.

// longKey is past HMAC-SHA256's 64-byte block: HMAC hashes it first.
var longKey = strings.Repeat("0123456789abcdef", 5)

// equivalents returns classes of passwords scrypt cannot tell apart,
// each led by the one a node would send, and followed by a near miss of
// another class.
func equivalents() [][]string {
	sum := sha256.Sum256([]byte(longKey))
	return [][]string{
		{"tok", "tok\x00", "tok\x00\x00\x00", "tok\x01"},
		{joinToken, joinToken + "\x00", joinToken + strings.Repeat("\x00", 64-len(joinToken)), "\x00" + joinToken},
		{longKey, string(sum[:]), string(sum[:]) + "\x00", longKey + "\x00"},
	}
}

// k3sHash makes key's hash as k3s's SCrypt.CreateHash does, with
// x/crypto's scrypt, at testParams.
func k3sHash(t *testing.T, key string) string {
	t.Helper()
	salt := make([]byte, testParams.SaltLen)
	rand.Read(salt)
	dk, err := xscrypt.Key([]byte(key), salt, 1<<testParams.LogN, testParams.R, testParams.P, testParams.KeyLen)
	if err != nil {
		t.Fatal(err)
	}
	return format(salt, testParams.LogN, testParams.R, testParams.P, dk)
}

// TestHMACKey: two passwords have one hmacKey exactly when x/crypto's
// scrypt derives one key from them, a SHA-256 that ends in a zero byte
// included; up to 64 bytes, hmacKey allocates nothing.
func TestHMACKey(t *testing.T) {
	// A long key whose SHA-256 ends in a zero byte: HMAC pads it with
	// zeros, so that byte is padding too.
	var zeroEnd string
	for i := 0; zeroEnd == ""; i++ {
		k := fmt.Sprint(longKey, i)
		if sum := sha256.Sum256([]byte(k)); sum[31] == 0 {
			zeroEnd = k
		}
	}
	zeroSum := sha256.Sum256([]byte(zeroEnd))
	keys := []string{"", "\x00", "a", "a\x00", "\x00a", strings.Repeat("a", 64), strings.Repeat("a", 63) + "\x00",
		strings.Repeat("a", 65), zeroEnd, string(zeroSum[:31]), string(zeroSum[:]), string(zeroSum[:30])}
	for _, class := range equivalents() {
		keys = append(keys, class...)
	}
	salt := []byte("saltsalt")
	derived := make([][]byte, len(keys))
	for i, k := range keys {
		var err error
		if derived[i], err = xscrypt.Key([]byte(k), salt, 16, 1, 1, 32); err != nil {
			t.Fatal(err)
		}
	}
	for i := range keys {
		for j := range keys {
			if same, oracle := hmacKey(keys[i]) == hmacKey(keys[j]), bytes.Equal(derived[i], derived[j]); same != oracle {
				t.Errorf("%q and %q: one hmacKey %v, one x/crypto scrypt key %v", keys[i], keys[j], same, oracle)
			}
		}
	}
	if raceEnabled {
		return
	}
	short := joinToken + "\x00"
	if n := testing.AllocsPerRun(100, func() { hmacKey(short) }); n != 0 {
		t.Errorf("hmacKey of %d bytes allocates %v times", len(short), n)
	}
}

// TestTokenVariantsOneToken: a variant of the join token that k3s
// accepts (the token with zero bytes after it; a long token's SHA-256)
// is the token: whichever an agent sends first after a start, the others
// of its class get in, no other token does, and the class costs one
// scrypt. With Options.Tokens and with LoadTokens.
func TestTokenVariantsOneToken(t *testing.T) {
	ctx := context.Background()
	for _, class := range equivalents() {
		for first := range len(class) - 1 {
			for _, load := range []bool{false, true} {
				var v *Verifier
				var stored string
				if load {
					v = newTestVerifier(t, NewMemoryStore(), nil)
					if err := v.LoadTokens(ctx, strings.NewReader(class[0]+",node,node\n")); err != nil {
						t.Fatal(err)
					}
					stored, _ = v.tokens().Get(ctx, "node")
				} else {
					tokens := NewMemoryStore()
					stored = k3sHash(t, class[0])
					tokens.Set("node", stored)
					v = newTestVerifier(t, NewMemoryStore(), &Options{Tokens: tokens})
				}
				runs := v.Stats().ScryptRuns
				order := append([]string{class[first]}, class...)
				for _, tok := range order {
					want := k3sVerifyHash(stored, tok) == nil
					if err := v.VerifyToken(ctx, "node", tok); (err == nil) != want {
						t.Fatalf("load %v, %q first: VerifyToken(%q) = %v, k3s matches: %v", load, class[first], tok, err, want)
					}
				}
				if st := v.Stats(); st.ScryptRuns-runs > 1 {
					t.Fatalf("load %v, %q first: %d scrypt runs, want 1 at most", load, class[first], st.ScryptRuns-runs)
				}
			}
		}
	}
}

// TestNodePasswordVariants: a node enrolled with a password, or verified
// first with a variant of it that k3s accepts, still gets in with the
// password, and a class costs one scrypt per node.
func TestNodePasswordVariants(t *testing.T) {
	ctx := context.Background()
	for _, class := range equivalents() {
		for first := range len(class) - 1 {
			s := NewMemoryStore()
			s.Set("stored", k3sHash(t, class[0]))
			v := newTestVerifier(t, s, nil)
			if err := v.Ensure(ctx, "enrolled", class[first]); err != nil {
				t.Fatal(err)
			}
			for _, node := range []string{"stored", "enrolled"} {
				stored, _ := s.Get(ctx, node)
				for _, pw := range append([]string{class[first]}, class...) {
					want := k3sVerifyHash(stored, pw) == nil
					if err := v.Verify(ctx, node, pw); (err == nil) != want {
						t.Fatalf("%q first: Verify(%s, %q) = %v, k3s matches: %v", class[first], node, pw, err, want)
					}
				}
			}
			// Enrolling, then verifying "stored"; the near misses are
			// known rejects.
			if st := v.Stats(); st.ScryptRuns != 2 {
				t.Fatalf("%q first: %d scrypt runs, want 2", class[first], st.ScryptRuns)
			}
		}
	}
}

// TestHasherVariantsAsK3s: through the Hasher, each password of a class
// gets k3s's outcome (pkg/authenticator/hash/scrypt.go VerifyHash over
// x/crypto's scrypt), in every order, on a hash k3s made and on one
// CreateHash made of any of them.
func TestHasherVariantsAsK3s(t *testing.T) {
	for _, class := range equivalents() {
		for _, made := range append([]string{""}, class[:len(class)-1]...) {
			for _, order := range permutations(class) {
				h := newTestHasher(t, nil)
				hash := k3sHash(t, class[0])
				if made != "" {
					var err error
					if hash, err = h.CreateHash(made); err != nil {
						t.Fatal(err)
					}
				}
				for _, key := range order {
					want := k3sVerifyHash(hash, key) == nil
					if err := h.VerifyHash(hash, key); (err == nil) != want {
						t.Fatalf("made of %q, order %q: VerifyHash(%q) = %v, k3s matches: %v", made, order, key, err, want)
					}
				}
				h.Close()
			}
		}
	}
}

// permutations returns every order of s.
func permutations(s []string) [][]string {
	if len(s) <= 1 {
		return [][]string{append([]string(nil), s...)}
	}
	var all [][]string
	for i := range s {
		rest := append(append([]string(nil), s[:i]...), s[i+1:]...)
		for _, p := range permutations(rest) {
			all = append(all, append([]string{s[i]}, p...))
		}
	}
	return all
}

// TestHasherLongKeys: k3s hashes and verifies a key of any length (its
// scrypt.go sets no limit); so does the Hasher, past
// Limits.MaxPasswordLen, at the cost of one SHA-256 of the key.
func TestHasherLongKeys(t *testing.T) {
	h := newTestHasher(t, nil)
	for _, n := range []int{defaultMaxPasswordLen + 1, 1 << 20} {
		key := strings.Repeat("k", n)
		made, err := h.CreateHash(key)
		if err != nil {
			t.Fatalf("CreateHash of %d bytes: %v", n, err)
		}
		if err := k3sVerifyHash(made, key); err != nil {
			t.Fatalf("k3s refuses the hash made of %d bytes: %v", n, err)
		}
		theirs := k3sHash(t, key)
		for _, hash := range []string{made, theirs} {
			if err := h.VerifyHash(hash, key); err != nil {
				t.Errorf("VerifyHash of %d bytes: %v", n, err)
			}
			if err := h.VerifyHash(hash, key[1:]); !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Errorf("VerifyHash of another key of %d bytes: %v", n-1, err)
			}
		}
	}
}
