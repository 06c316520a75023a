package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	xscrypt "golang.org/x/crypto/scrypt"
)

// testParams are cheap parameters for tests: 128·8·16 = 16 KiB per hash.
var testParams = Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

type vector struct {
	Password string `json:"password"`
	Hash     string `json:"hash"`
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/k3s_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	return vs
}

// TestVectors checks hashes computed by an independent scrypt
// implementation in the format k3s stores.
func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Hash[:22], func(t *testing.T) {
			t.Parallel()
			if err := CompareHashAndPassword(v.Hash, v.Password); err != nil {
				t.Fatalf("vector rejected: %v", err)
			}
			// Upper-case salt hex is accepted on read.
			parts := strings.Split(v.Hash, ":")
			parts[1] = strings.ToUpper(parts[1])
			h, err := parseHash(strings.Join(parts, ":"), Limits{}.withDefaults())
			if err != nil {
				t.Fatalf("upper-case salt rejected: %v", err)
			}
			if got := format(h.salt, h.logN, h.r, h.p, h.key); got != v.Hash {
				t.Fatalf("re-formatted hash %q, want %q", got, v.Hash)
			}
		})
	}
}

// TestVectorMismatch uses the cheap (logN 10) vector for wrong passwords.
func TestVectorMismatch(t *testing.T) {
	for _, v := range loadVectors(t) {
		h, err := parseHash(v.Hash, Limits{}.withDefaults())
		if err != nil || h.logN > 10 {
			continue
		}
		for _, pw := range []string{v.Password + "x", "hello world", strings.Repeat("a", 32)} {
			if err := CompareHashAndPassword(v.Hash, pw); !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Errorf("password %q: err %v, want mismatch", pw, err)
			}
		}
		return
	}
	t.Fatal("no vector with logN <= 10")
}

var hashShape = regexp.MustCompile(`^\$1:[0-9a-f]{16}:4:8:1:[A-Za-z0-9+/]{86}$`)

func TestGenerateFromPassword(t *testing.T) {
	a, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		t.Fatal(err)
	}
	if !hashShape.MatchString(a) {
		t.Fatalf("hash %q does not look like a k3s hash", a)
	}
	if a == b {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	for _, h := range []string{a, b} {
		if err := CompareHashAndPassword(h, "pw"); err != nil {
			t.Fatalf("own hash rejected: %v", err)
		}
		if err := CompareHashAndPassword(h, "pw2"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("wrong password: %v", err)
		}
	}
	// Other parameters round-trip too.
	p := Params{LogN: 5, R: 2, P: 3, KeyLen: 32, SaltLen: 16}
	h, err := GenerateFromPassword("", p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$1:") || strings.Count(h, ":") != 5 || !strings.Contains(h, ":5:2:3:") {
		t.Fatalf("hash %q", h)
	}
	if err := CompareHashAndPassword(h, ""); err != nil {
		t.Fatal(err)
	}
}

func TestGenerateInvalidParams(t *testing.T) {
	for _, tt := range []struct {
		p    Params
		want string
	}{
		{Params{}, "LogN 0"},
		{Params{LogN: 31, R: 8, P: 1, KeyLen: 64, SaltLen: 8}, "LogN 31"},
		{Params{LogN: 4, R: 0, P: 1, KeyLen: 64, SaltLen: 8}, "R 0"},
		{Params{LogN: 4, R: 8, P: 0, KeyLen: 64, SaltLen: 8}, "P 0"},
		{Params{LogN: 4, R: 8, P: 1, KeyLen: 8, SaltLen: 8}, "KeyLen 8"},
		{Params{LogN: 4, R: 8, P: 1, KeyLen: 2048, SaltLen: 8}, "KeyLen 2048"},
		{Params{LogN: 4, R: 8, P: 1, KeyLen: 64, SaltLen: 4}, "SaltLen 4"},
		{Params{LogN: 20, R: 8, P: 1, KeyLen: 64, SaltLen: 8}, "memory"},
		{Params{LogN: 15, R: 8, P: 64, KeyLen: 64, SaltLen: 8}, "work"},
	} {
		_, err := GenerateFromPassword("pw", tt.p)
		if !errors.Is(err, ErrInvalidParams) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err %v, want ErrInvalidParams mentioning %q", tt.p, err, tt.want)
		}
	}
}

// TestParseErrors checks that each malformed part is named in the error.
func TestParseErrors(t *testing.T) {
	good, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(good, ":")
	with := func(i int, s string) string {
		g := append([]string(nil), f...)
		g[i] = s
		return strings.Join(g, ":")
	}
	tests := []struct {
		name, hash, want string
	}{
		{"empty", "", "1 fields"},
		{"too few fields", strings.Join(f[:5], ":"), "5 fields"},
		{"too many fields", good + ":x", "more than 6 fields"},
		{"version 2", with(0, "$2"), "version"},
		{"no version", with(0, ""), "version"},
		{"empty salt", with(1, ""), "empty salt"},
		{"odd hex salt", with(1, "abc"), "salt is not hex"},
		{"non-hex salt", with(1, "zz11223344556677"), "salt is not hex"},
		{"empty logN", with(2, ""), "empty logN"},
		{"signed logN", with(2, "+4"), "logN is not a decimal"},
		{"negative logN", with(2, "-4"), "logN is not a decimal"},
		{"spaced logN", with(2, " 4"), "logN is not a decimal"},
		{"hex logN", with(2, "0x4"), "logN is not a decimal"},
		{"leading zero logN", with(2, "04"), "leading zero"},
		{"huge logN", with(2, "99999999999999999999"), "logN has more than 9 digits"},
		{"logN 0", with(2, "0"), "logN 0 out of range"},
		{"logN 31", with(2, "31"), "logN 31 out of range"},
		{"logN 40", with(2, "40"), "logN 40 out of range"},
		{"logN 20 memory", with(2, "20"), "memory"},
		{"r 0", with(3, "0"), "r and p"},
		{"r huge", with(3, "999999999"), "memory"},
		{"p 0", with(4, "0"), "r and p"},
		{"p huge", with(4, "999999999"), "work"},
		{"empty key", with(5, ""), "empty key"},
		{"padded key", with(5, f[5]+"=="), "base64"},
		{"url base64 key", with(5, strings.NewReplacer("+", "-", "/", "_").Replace(f[5])+"-_"), "base64"},
		{"key with newline", with(5, f[5][:40]+"\n"+f[5][40:]), "line break"},
		{"short key", with(5, "AAAAAAAAAAA"), "key is 8 bytes"},
		{"non-canonical key bits", with(5, f[5][:85]+"B"), "base64"},
		{"too long", good + strings.Repeat("A", maxHashLen), "bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CompareHashAndPassword(tt.hash, "pw")
			if !errors.Is(err, ErrInvalidHash) {
				t.Fatalf("err %v, want ErrInvalidHash", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "verify: ") {
				t.Fatalf("err %q does not start with verify: and mention %q", err, tt.want)
			}
			if strings.Contains(err.Error(), f[5]) {
				t.Fatalf("err %q repeats the stored key", err)
			}
		})
	}
}

// TestTamperedHashAllocatesNothingLarge checks that parameters beyond the
// limits are refused before scrypt allocates its memory.
func TestTamperedHashAllocatesNothingLarge(t *testing.T) {
	good, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(good, ":")
	for _, tampered := range []string{
		strings.Join([]string{f[0], f[1], "40", f[3], f[4], f[5]}, ":"),
		strings.Join([]string{f[0], f[1], "18", "9", f[4], f[5]}, ":"),
		strings.Join([]string{f[0], f[1], "15", f[3], "1000000", f[5]}, ":"),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := CompareHashAndPassword(tampered, "pw")
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidHash) {
			t.Fatalf("tampered hash: err %v, want ErrInvalidHash", err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Fatalf("tampered hash allocated %d bytes before being refused", got)
		}
	}
}

func TestLimits(t *testing.T) {
	h, err := GenerateFromPassword("pw", Params{LogN: 10, R: 8, P: 2, KeyLen: 64, SaltLen: 8})
	if err != nil {
		t.Fatal(err)
	}
	// 128·8·1024 = 1 MiB of memory, 2 MiB of work.
	if _, err := parseHash(h, Limits{MaxMemory: 1 << 20, MaxWork: 2 << 20}); err != nil {
		t.Fatalf("hash at the limits rejected: %v", err)
	}
	if _, err := parseHash(h, Limits{MaxMemory: 1<<20 - 1}.withDefaults()); !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("memory limit: %v", err)
	}
	if _, err := parseHash(h, Limits{MaxWork: 2<<20 - 1}.withDefaults()); !errors.Is(err, ErrInvalidHash) || !strings.Contains(err.Error(), "work") {
		t.Fatalf("work limit: %v", err)
	}
}

// TestHashesInterchangeableWithXCrypto: a hash GenerateFromPassword makes
// verifies with golang.org/x/crypto/scrypt, what k3s verifies with, and one
// made with x/crypto verifies here, through CompareHashAndPassword and a
// Verifier. (That the two scrypts agree on every input is package scrypt's
// TestKeyDifferential.)
func TestHashesInterchangeableWithXCrypto(t *testing.T) {
	ours, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHash(ours, Limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if key, err := xscrypt.Key([]byte("pw"), h.salt, 1<<h.logN, h.r, h.p, len(h.key)); err != nil || !bytes.Equal(key, h.key) {
		t.Fatalf("x/crypto derives %x, %v; the hash holds %x", key, err, h.key)
	}
	salt := []byte("saltsalt")
	key, err := xscrypt.Key([]byte("pw"), salt, 1<<testParams.LogN, testParams.R, testParams.P, testParams.KeyLen)
	if err != nil {
		t.Fatal(err)
	}
	theirs := format(salt, testParams.LogN, testParams.R, testParams.P, key)
	if err := CompareHashAndPassword(theirs, "pw"); err != nil {
		t.Fatal(err)
	}
	s := NewMemoryStore()
	s.Set("n", theirs)
	v := newTestVerifier(t, s, nil)
	if err := v.Verify(context.Background(), "n", "pw"); err != nil {
		t.Fatal(err)
	}
	if err := v.Verify(context.Background(), "n", "other"); !errors.Is(err, ErrMismatchedHashAndPassword) {
		t.Fatalf("wrong password: %v", err)
	}
}
