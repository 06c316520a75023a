package verify

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	xscrypt "golang.org/x/crypto/scrypt"
)

// k3sHasher is the method set of k3s's pkg/authenticator/hash.Hasher.
type k3sHasher interface {
	CreateHash(secretKey string) (string, error)
	VerifyHash(hash, secretKey string) error
}

var _ k3sHasher = (*Hasher)(nil)

func newTestHasher(t *testing.T, opts *Options) *Hasher {
	t.Helper()
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Params == (Params{}) {
		o.Params = testParams
	}
	h, err := NewHasher(&o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// k3sVerifyHash is what k3s's SCrypt.VerifyHash does, written from its
// description: scan $version:salt(hex):N:r:p:key, run x/crypto's scrypt
// with the key's length, compare in constant time.
func k3sVerifyHash(hash, key string) error {
	var version, n uint
	var r, p int
	var salt []byte
	var enc string
	if _, err := fmt.Sscanf(hash, "$%d:%x:%d:%d:%d:%s", &version, &salt, &n, &r, &p, &enc); err != nil {
		return err
	}
	if version != 1 {
		return errors.New("version")
	}
	want, err := base64.RawStdEncoding.DecodeString(enc)
	if err != nil {
		return err
	}
	got, err := xscrypt.Key([]byte(key), salt, 1<<n, r, p, len(want))
	if err != nil {
		return err
	}
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return errors.New("hash does not match")
	}
	return nil
}

// TestHasherAsK3s: for the compatibility vectors and for hashes either
// side made, the Hasher's outcome is k3s's: a match for the key, an
// error for any other.
func TestHasherAsK3s(t *testing.T) {
	h := newTestHasher(t, nil)
	type pair struct{ hash, key string }
	var cases []pair
	for _, v := range loadVectors(t) {
		if logN, _ := strconv.Atoi(strings.Split(v.Hash, ":")[2]); logN <= 10 { // tests keep to logN 4 to 10
			cases = append(cases, pair{v.Hash, v.Password})
		}
	}
	for i := range 4 {
		key := fmt.Sprint("key-", i)
		made, err := h.CreateHash(key)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, pair{made, key}, pair{mustHash(t, key), key})
	}
	for _, c := range cases {
		for _, key := range []string{c.key, c.key + "x", "", strings.ToUpper(c.key)} {
			want := k3sVerifyHash(c.hash, key) == nil
			if got := h.VerifyHash(c.hash, key) == nil; got != want {
				t.Errorf("VerifyHash(%.24s..., %q): match %v, k3s %v", c.hash, key, got, want)
			}
		}
	}
}

// TestHasherCreateThenVerify: CreateHash makes a k3s hash of the key at
// Options.Params, and the VerifyHash that follows costs no scrypt; the
// hash's other keys are refused without scrypt; two hashes of one key
// have two salts.
func TestHasherCreateThenVerify(t *testing.T) {
	h := newTestHasher(t, nil)
	made, err := h.CreateHash("token")
	if err != nil {
		t.Fatal(err)
	}
	if err := k3sVerifyHash(made, "token"); err != nil {
		t.Fatalf("k3s refuses the hash made: %v", err)
	}
	if f := strings.Split(made, ":"); len(f) != 6 || f[0] != "$1" || len(f[1]) != 16 || f[2] != "4" || f[3] != "8" || f[4] != "1" {
		t.Fatalf("hash %q is not in k3s's format", made)
	}
	for range 10 {
		if err := h.VerifyHash(made, "token"); err != nil {
			t.Fatal(err)
		}
		if err := h.VerifyHash(made, "guess"); !errors.Is(err, ErrMismatchedHashAndPassword) {
			t.Fatalf("wrong key: %v", err)
		}
	}
	if st := h.Stats(); st.ScryptRuns != 1 || st.KnownMatchRejects != 10 {
		t.Fatalf("stats %+v: want the one CreateHash's scrypt and 10 known-match rejects", st)
	}
	again, err := h.CreateHash("token")
	if err != nil {
		t.Fatal(err)
	}
	if again == made {
		t.Fatal("two CreateHash of one key gave one salt")
	}
}

// TestHasherConcurrentOneScrypt: 1,000 concurrent VerifyHash calls of one
// right (hash, key) cost one scrypt computation.
func TestHasherConcurrentOneScrypt(t *testing.T) {
	h := newTestHasher(t, nil)
	g := newGate()
	g.install(t, h.v)
	stored := mustHash(t, "token")
	const calls = 1000
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	for range calls {
		wg.Go(func() { errs <- h.VerifyHash(stored, "token") })
	}
	<-g.entered
	waitFor(t, "every call to join", func() bool { return h.Stats().Shared == calls-1 })
	g.open()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := h.Stats(); st.ScryptRuns != 1 {
		t.Fatalf("stats %+v: want 1 scrypt run", st)
	}
}

// TestHasherTampered: malformed hashes and hashes beyond the limits are
// errors, found before anything large is allocated.
func TestHasherTampered(t *testing.T) {
	h := newTestHasher(t, nil)
	good := mustHash(t, "pw")
	f := strings.Split(good, ":")
	for _, tampered := range []string{
		strings.Join([]string{f[0], f[1], "40", f[3], f[4], f[5]}, ":"),
		strings.Join([]string{f[0], f[1], "18", "9", f[4], f[5]}, ":"),
		strings.Join([]string{f[0], f[1], "15", f[3], "1000000", f[5]}, ":"),
		strings.Join([]string{"$2", f[1], f[2], f[3], f[4], f[5]}, ":"),
		strings.Join([]string{f[0], "xyz", f[2], f[3], f[4], f[5]}, ":"),
		"", "$1", good + ":extra", strings.Repeat("$", maxHashLen+1),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := h.VerifyHash(tampered, "pw")
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrInvalidHash) || !strings.HasPrefix(err.Error(), "verify: ") {
			t.Errorf("VerifyHash(%.40q): %v, want ErrInvalidHash", tampered, err)
		}
		if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
			t.Errorf("VerifyHash(%.40q) allocated %d bytes before refusing it", tampered, got)
		}
	}
	if st := h.Stats(); st.ScryptRuns != 0 {
		t.Fatalf("stats %+v: tampered hashes ran scrypt", st)
	}
}

func TestHasherClosed(t *testing.T) {
	h := newTestHasher(t, nil)
	h.Close()
	if _, err := h.CreateHash("k"); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateHash after Close: %v", err)
	}
	if err := h.VerifyHash(mustHash(t, "k"), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("VerifyHash after Close: %v", err)
	}
}

// TestHasherMatchesKeepGuessDelay: k3s checks every agent's join token
// against the one hash of its passwd entry (pkg/authenticator/passwordfile
// through nodepassword.Hasher), so the herd's matches do not reset the
// failure delay of that hash: a guesser keeps meeting it.
func TestHasherMatchesKeepGuessDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newTestHasher(t, &Options{MaxFailDelay: 500 * time.Millisecond})
		made, err := h.CreateHash(joinToken)
		if err != nil {
			t.Fatal(err)
		}
		guess := func(i int) time.Duration {
			start := time.Now()
			if err := h.VerifyHash(made, fmt.Sprint("guess-", i)); !errors.Is(err, ErrMismatchedHashAndPassword) {
				t.Fatalf("guess %d: %v", i, err)
			}
			return time.Since(start)
		}
		guess(0)
		if d := guess(1); d != 100*time.Millisecond {
			t.Fatalf("second guess delayed %v, want 100ms", d)
		}
		for range 5 {
			if err := h.VerifyHash(made, joinToken); err != nil {
				t.Fatal(err)
			}
		}
		if d := guess(2); d != 200*time.Millisecond {
			t.Fatalf("a guess after the agents' matches delayed %v, want 200ms: the matches reset the count", d)
		}
		h.Close()
	})
}

// TestHasherBudgetErrorHidesHash: a hash refused for the budget or the
// limits is named "the hash given" in the error, never quoted: the hash
// is a secret's verifier.
func TestHasherBudgetErrorHidesHash(t *testing.T) {
	h := newTestHasher(t, &Options{ScryptMemory: 2 * lane(testParams.LogN, testParams.R)})
	big := testParams
	big.LogN = 8
	hash, err := GenerateFromPassword("pw", big)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(hash, ":")
	for _, bad := range []string{hash, strings.Join([]string{f[0], f[1], "40", f[3], f[4], f[5]}, ":")} {
		err := h.VerifyHash(bad, "pw")
		if !errors.Is(err, ErrInvalidHash) {
			t.Fatalf("a hash over the budget: %v", err)
		}
		if msg := err.Error(); strings.Contains(msg, f[1]) || strings.Contains(msg, f[5]) {
			t.Errorf("error %q quotes the hash", msg)
		}
	}
}
