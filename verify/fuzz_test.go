package verify

import (
	"errors"
	"strings"
	"testing"
)

// fuzzLimits keep each fuzzed scrypt call small.
var fuzzLimits = Limits{MaxMemory: 1 << 20, MaxWork: 4 << 20}

// FuzzParseHash checks that no stored hash makes the parser or the
// comparison panic, that every error wraps ErrInvalidHash (or is a
// mismatch), and that whatever parses re-formats to the same hash, up to
// the case of the salt's hex.
func FuzzParseHash(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.Hash, v.Password)
	}
	good, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, "pw")
	f.Add(good, "")
	f.Add("$1:00:4:8:1:AAAAAAAAAAAAAAAAAAAAAA", "x")
	f.Add("$1:0011223344556677:40:8:1:AAAAAAAAAAAAAAAAAAAAAA", "x")
	f.Add("$1:0011223344556677:15:8:999999999:AAAAAAAAAAAAAAAAAAAAAA", "x")
	f.Add("$1::::::", "x")
	f.Add("$2:00:4:8:1:AA", "x")
	f.Add(strings.Repeat(":", 100), "x")
	f.Fuzz(func(t *testing.T, s, password string) {
		h, err := parseHash(s, fuzzLimits)
		if err != nil {
			if !errors.Is(err, ErrInvalidHash) {
				t.Fatalf("parse error %v does not wrap ErrInvalidHash", err)
			}
			if err2 := fuzzLimits.CompareHashAndPassword(s, password); !errors.Is(err2, ErrInvalidHash) {
				t.Fatalf("parse fails (%v) but compare says %v", err, err2)
			}
			return
		}
		if h.memory > fuzzLimits.MaxMemory || h.work > fuzzLimits.MaxWork {
			t.Fatalf("accepted memory %d work %d beyond limits", h.memory, h.work)
		}
		if got := format(h.salt, h.logN, h.r, h.p, h.key); !strings.EqualFold(got, s) || got[len(got)-len(strings.Split(got, ":")[5]):] != s[len(s)-len(strings.Split(s, ":")[5]):] {
			t.Fatalf("re-formatted %q, parsed from %q", got, s)
		}
		err = fuzzLimits.CompareHashAndPassword(s, password)
		if err != nil && !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("compare of a parsed hash: %v", err)
		}
	})
}
