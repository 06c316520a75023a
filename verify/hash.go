package verify

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/nodepass/nodepass/scrypt"
)

// Params are the scrypt parameters of a new hash.
type Params struct {
	LogN    int // the cost: N = 2^LogN, 1 to 30
	R, P    int // scrypt's block size and parallelism, at least 1
	KeyLen  int // bytes of derived key, 16 to 1024
	SaltLen int // bytes of random salt, 8 to 1024
}

// DefaultParams are k3s's and RKE2's: 32 MiB and about 0.1 s of a core.
var DefaultParams = Params{LogN: 15, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

// Limits of the format.
const (
	maxHashLen = 4096 // longer stored hashes are rejected before parsing
	minKeyLen  = 16   // shorter keys would make a false accept likely
	maxKeyLen  = 1024
	minSaltLen = 8 // for new hashes; stored hashes need at least one byte
	maxSaltLen = 1024
	maxLogN    = 30
)

// Limits bound a stored hash, refused with ErrInvalidHash before anything
// is allocated, and a password (ErrInvalidInput). Zero: the default.
type Limits struct {
	MaxMemory      int64 // 128·r·N bytes (a lane), and 128·(r+1)·p (PBKDF2's); default 256 MiB
	MaxWork        int64 // 128·r·N·p bytes mixed; default 1 GiB
	MaxPasswordLen int   // default 1024
}

// hash is a parsed stored hash.
type hash struct {
	salt []byte
	logN int
	r, p int
	key  []byte
	work int64 // 128·r·N·p
}

// GenerateFromPassword hashes password with a random salt, in k3s's
// format: $1:<salt hex>:<logN>:<r>:<p>:<key, unpadded base64>.
func GenerateFromPassword(password string, p Params) (string, error) {
	if err := p.validate(Limits{}.withDefaults()); err != nil {
		return "", err
	}
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("verify: reading random salt: %w", err)
	}
	key, err := scrypt.Key([]byte(password), salt, 1<<p.LogN, p.R, p.P, p.KeyLen)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return format(salt, p.LogN, p.R, p.P, key), nil
}

func format(salt []byte, logN, r, p int, key []byte) string {
	return fmt.Sprintf("$1:%x:%d:%d:%d:%s", salt, logN, r, p, base64.RawStdEncoding.EncodeToString(key))
}

func (p Params) validate(lim Limits) error {
	switch {
	case p.LogN < 1 || p.LogN > maxLogN:
		return fmt.Errorf("%w: LogN %d out of range 1..%d", ErrInvalidParams, p.LogN, maxLogN)
	case p.R < 1:
		return fmt.Errorf("%w: R %d below 1", ErrInvalidParams, p.R)
	case p.P < 1:
		return fmt.Errorf("%w: P %d below 1", ErrInvalidParams, p.P)
	case p.KeyLen < minKeyLen || p.KeyLen > maxKeyLen:
		return fmt.Errorf("%w: KeyLen %d out of range %d..%d", ErrInvalidParams, p.KeyLen, minKeyLen, maxKeyLen)
	case p.SaltLen < minSaltLen || p.SaltLen > maxSaltLen:
		return fmt.Errorf("%w: SaltLen %d out of range %d..%d", ErrInvalidParams, p.SaltLen, minSaltLen, maxSaltLen)
	}
	if _, err := cost(p.LogN, p.R, p.P, lim); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return nil
}

// parseHash parses a stored hash and checks it against lim (with its
// defaults), without scrypt. Errors wrap ErrInvalidHash and say which
// field is wrong without repeating the hash.
func parseHash(s string, lim Limits) (hash, error) {
	var h hash
	if len(s) > maxHashLen {
		return h, fmt.Errorf("%w: %d bytes long, limit %d", ErrInvalidHash, len(s), maxHashLen)
	}
	var f [6]string // not a slice: no allocation
	n := 0
	for part := range strings.SplitSeq(s, ":") {
		if n == len(f) {
			return h, fmt.Errorf("%w: more than 6 fields", ErrInvalidHash)
		}
		f[n], n = part, n+1
	}
	switch {
	case n < len(f):
		return h, fmt.Errorf("%w: %d fields, want 6", ErrInvalidHash, n)
	case f[0] != "$1":
		return h, fmt.Errorf("%w: unsupported version field (want $1)", ErrInvalidHash)
	case f[1] == "":
		return h, fmt.Errorf("%w: empty salt", ErrInvalidHash)
	case len(f[1]) > 2*maxSaltLen:
		return h, fmt.Errorf("%w: salt longer than %d bytes", ErrInvalidHash, maxSaltLen)
	}
	salt, err := hex.DecodeString(f[1])
	if err != nil {
		return h, fmt.Errorf("%w: salt is not hex: %v", ErrInvalidHash, err)
	}
	if h.logN, err = parseField("logN", f[2]); err != nil {
		return h, err
	}
	if h.r, err = parseField("r", f[3]); err != nil {
		return h, err
	}
	if h.p, err = parseField("p", f[4]); err != nil {
		return h, err
	}
	if h.work, err = cost(h.logN, h.r, h.p, lim); err != nil {
		return h, fmt.Errorf("%w: %v", ErrInvalidHash, err)
	}
	key, err := base64.RawStdEncoding.Strict().DecodeString(f[5])
	switch {
	case f[5] == "":
		return h, fmt.Errorf("%w: empty key", ErrInvalidHash)
	case err != nil:
		return h, fmt.Errorf("%w: key is not unpadded standard base64: %v", ErrInvalidHash, err)
	case strings.ContainsAny(f[5], "\r\n"): // which the decoder skips
		return h, fmt.Errorf("%w: key contains a line break", ErrInvalidHash)
	case len(key) < minKeyLen || len(key) > maxKeyLen:
		return h, fmt.Errorf("%w: key is %d bytes, want %d..%d", ErrInvalidHash, len(key), minKeyLen, maxKeyLen)
	}
	h.salt, h.key = salt, key
	return h, nil
}

// parseField parses a non-negative decimal of at most 9 digits in the
// canonical form k3s writes (%d); signs, spaces, leading zeros and other
// forms strconv would accept are refused.
func parseField(name, s string) (int, error) {
	switch {
	case s == "":
		return 0, fmt.Errorf("%w: empty %s", ErrInvalidHash, name)
	case len(s) > 9:
		return 0, fmt.Errorf("%w: %s has more than 9 digits", ErrInvalidHash, name)
	case strings.Trim(s, "0123456789") != "":
		return 0, fmt.Errorf("%w: %s is not a decimal number", ErrInvalidHash, name)
	case len(s) > 1 && s[0] == '0':
		return 0, fmt.Errorf("%w: %s has a leading zero", ErrInvalidHash, name)
	}
	v, _ := strconv.Atoi(s) // nine digits: no error
	return v, nil
}

// cost returns the work 128·r·N·p, or an error when the memory (a
// lane's, or PBKDF2's output, pbkdf2Bytes) or the work passes its limit in
// lim (with its defaults). It never overflows: every product is checked
// against the limit before it is formed.
func cost(logN, r, p int, lim Limits) (work int64, err error) {
	maxMem, maxWork := lim.MaxMemory, lim.MaxWork
	if logN < 1 || logN > maxLogN {
		return 0, fmt.Errorf("logN %d out of range 1..%d", logN, maxLogN)
	}
	if r < 1 || p < 1 {
		return 0, fmt.Errorf("r and p must be at least 1 (r=%d, p=%d)", r, p)
	}
	perBlock := int64(128) << logN // 128·N, at most 2^37
	if int64(r) > maxMem/perBlock {
		return 0, fmt.Errorf("memory 128·r·N (logN=%d, r=%d) exceeds limit %d bytes", logN, r, maxMem)
	}
	memory := perBlock * int64(r)
	if int64(p) > maxWork/memory {
		return 0, fmt.Errorf("work 128·r·N·p (logN=%d, r=%d, p=%d) exceeds limit %d bytes", logN, r, p, maxWork)
	}
	// pbkdf2Bytes ≤ 128·r·N·p, checked above: it cannot overflow.
	if pbkdf2Bytes(r, p) > maxMem {
		return 0, fmt.Errorf("memory of PBKDF2's output 128·(r+1)·p (r=%d, p=%d) exceeds limit %d bytes", r, p, maxMem)
	}
	if int64(r)*int64(p) >= 1<<30 { // x/crypto refuses it; only raised limits let it here
		return 0, fmt.Errorf("r·p = %d·%d too large for scrypt", r, p)
	}
	return memory * int64(p), nil
}

// pbkdf2Bytes is what one hash at (r, p) allocates besides its lanes:
// PBKDF2's output, 128·r·p bytes, and the slice of its p blocks, up to
// 128 bytes a block. With a small N it outweighs the lanes.
func pbkdf2Bytes(r, p int) int64 { return 128 * (int64(r) + 1) * int64(p) }

// CompareHashAndPassword compares a stored hash with password, in
// constant time: nil, ErrMismatchedHashAndPassword or ErrInvalidHash.
func CompareHashAndPassword(hash, password string) error {
	h, err := parseHash(hash, Limits{}.withDefaults())
	if err != nil {
		return err
	}
	derived, err := scrypt.Key([]byte(password), h.salt, 1<<h.logN, h.r, h.p, len(h.key))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidHash, err)
	}
	if subtle.ConstantTimeCompare(derived, h.key) != 1 {
		return ErrMismatchedHashAndPassword
	}
	return nil
}
