package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fuzzLimits keep each fuzzed scrypt call small.
var fuzzLimits = Limits{MaxMemory: 1 << 20, MaxWork: 4 << 20}.withDefaults()

// compareWithin is the fuzz tests' oracle: CompareHashAndPassword for a
// hash within the limits l, ErrInvalidHash for one beyond them.
func compareWithin(l Limits, stored, password string) error {
	if _, err := parseHash(stored, l); err != nil {
		return err
	}
	return CompareHashAndPassword(stored, password)
}

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
			if err2 := compareWithin(fuzzLimits, s, password); !errors.Is(err2, ErrInvalidHash) {
				t.Fatalf("parse fails (%v) but compare says %v", err, err2)
			}
			return
		}
		if memory := int64(128*h.r) << h.logN; memory > fuzzLimits.MaxMemory || h.work > fuzzLimits.MaxWork {
			t.Fatalf("accepted memory %d work %d beyond limits", memory, h.work)
		}
		if got := format(h.salt, h.logN, h.r, h.p, h.key); !strings.EqualFold(got, s) || got[len(got)-len(strings.Split(got, ":")[5]):] != s[len(s)-len(strings.Split(s, ":")[5]):] {
			t.Fatalf("re-formatted %q, parsed from %q", got, s)
		}
		err = compareWithin(fuzzLimits, s, password)
		if err != nil && !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("compare of a parsed hash: %v", err)
		}
	})
}

// FuzzVerifier drives Verify and Ensure with random (node, password,
// stored hash) triples, with CompareHashAndPassword as the oracle: the
// Verifier, its cache and its known-match rule must never answer
// differently from a fresh scrypt comparison.
func FuzzVerifier(f *testing.F) {
	good, err := GenerateFromPassword("pw", testParams)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("node-1", "pw", good)
	f.Add("node-1", "pw2", good)
	f.Add("NODE-1", "pw", good)
	f.Add("", "pw", good)
	f.Add("n", "", good)
	f.Add("n\x00", "pw", good)
	f.Add("n", "pw", "$1:0011223344556677:40:8:1:AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("n", "pw", "garbage")
	for _, v := range loadVectors(f) {
		if strings.Contains(v.Hash, ":10:") {
			f.Add("vector", v.Password, v.Hash)
		}
	}
	store := NewMemoryStore()
	v, err := New(store, &Options{Params: testParams, Limits: fuzzLimits, MaxFailDelay: -1})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { v.Close() })
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, node, password, stored string) {
		canonical, _, inputErr := v.checkInput(node, password)
		store.Set(canonical, stored)
		got := v.Verify(ctx, node, password)
		if inputErr != nil {
			if !errors.Is(got, ErrInvalidInput) {
				t.Fatalf("invalid input answered %v", got)
			}
			return
		}
		want := compareWithin(fuzzLimits, stored, password)
		switch {
		case want == nil:
			if got != nil {
				t.Fatalf("oracle matches, Verifier says %v", got)
			}
		case errors.Is(want, ErrMismatchedHashAndPassword):
			if !errors.Is(got, ErrMismatchedHashAndPassword) {
				t.Fatalf("oracle mismatches, Verifier says %v", got)
			}
		default:
			if !errors.Is(got, ErrInvalidHash) {
				t.Fatalf("oracle says %v, Verifier says %v", want, got)
			}
		}
		// Enrolling a new name under the password, then verifying it.
		fresh := "fuzz-enroll-" + canonical
		if len(fresh) > maxNodeNameLen {
			return
		}
		store.Delete(fresh)
		if err := v.Ensure(ctx, fresh, password); err != nil {
			t.Fatalf("enroll: %v", err)
		}
		if err := v.Verify(ctx, fresh, password); err != nil {
			t.Fatalf("verify after enroll: %v", err)
		}
		if err := v.Verify(ctx, fresh, password+"x"); !errors.Is(err, ErrMismatchedHashAndPassword) && !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("other password after enroll: %v", err)
		}
	})
}
