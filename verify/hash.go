package verify

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	xscrypt "golang.org/x/crypto/scrypt"

	"github.com/nodepass/nodepass/scrypt"
)

// Params are the scrypt parameters used to hash a new password.
//
// The zero value is not usable; start from DefaultParams.
type Params struct {
	// LogN is the CPU/memory cost exponent: N = 2^LogN. 1 to 30.
	LogN int
	// R is the scrypt block size. At least 1.
	R int
	// P is the scrypt parallelisation factor. At least 1.
	P int
	// KeyLen is the length of the derived key in bytes, 16 to 1024.
	KeyLen int
	// SaltLen is the length of the random salt in bytes, 8 to 1024.
	SaltLen int
}

// DefaultParams are the parameters k3s and RKE2 use: N = 2^15, r = 8, p = 1,
// a 64-byte key and an 8-byte salt. One hash costs 32 MiB and roughly 0.1 s
// of one core.
var DefaultParams = Params{LogN: 15, R: 8, P: 1, KeyLen: 64, SaltLen: 8}

// Bounds on what a stored hash may ask for. They keep a tampered or corrupt
// hash from allocating or computing without limit.
const (
	// DefaultMaxMemory bounds 128·r·N, the memory one scrypt computation
	// allocates: 256 MiB, eight times k3s's 32 MiB.
	DefaultMaxMemory int64 = 256 << 20
	// DefaultMaxWork bounds 128·r·N·p, the bytes one computation mixes
	// (its CPU cost): 1 GiB, 32 times k3s's default.
	DefaultMaxWork int64 = 1 << 30

	maxHashLen = 4096 // longer stored hashes are rejected before parsing
	minKeyLen  = 16   // shorter keys would make a false accept likely
	maxKeyLen  = 1024
	minSaltLen = 8 // for new hashes; stored hashes need at least one byte
	maxSaltLen = 1024
	maxLogN    = 30
)

// Limits bounds the scrypt parameters a stored hash may ask for. A hash
// outside them is rejected with ErrInvalidHash before anything is allocated.
// The zero value means the defaults.
type Limits struct {
	// MaxMemory bounds 128·r·N bytes. Zero means DefaultMaxMemory.
	MaxMemory int64
	// MaxWork bounds 128·r·N·p bytes mixed. Zero means DefaultMaxWork.
	MaxWork int64
}

func (l Limits) memory() int64 {
	if l.MaxMemory > 0 {
		return l.MaxMemory
	}
	return DefaultMaxMemory
}

func (l Limits) work() int64 {
	if l.MaxWork > 0 {
		return l.MaxWork
	}
	return DefaultMaxWork
}

// hash is a parsed stored hash.
type hash struct {
	salt   []byte
	logN   int
	r, p   int
	key    []byte
	memory int64 // 128·r·N
	work   int64 // 128·r·N·p
}

// GenerateFromPassword hashes password with a fresh random salt and returns
// it in the format k3s and RKE2 store: $1:<salt hex>:<logN>:<r>:<p>:<key>,
// the key in unpadded standard base64. Params outside their documented
// ranges or above the default Limits give an error wrapping ErrInvalidParams.
func GenerateFromPassword(password string, p Params) (string, error) {
	return generate(password, p, Limits{}, fastKey)
}

// Scrypt names a scrypt implementation. Both give the same bytes for
// every input (this module's scrypt package is tested against x/crypto's
// on every build), so hashes made with either verify with the other.
type Scrypt uint8

const (
	// ScryptFast is this module's scrypt package: a SIMD BlockMix on
	// amd64 and working memory reused across calls; about twice as fast
	// per hash as x/crypto's on amd64, and it allocates no 32 MiB buffer
	// per call.
	ScryptFast Scrypt = iota
	// ScryptXCrypto is golang.org/x/crypto/scrypt, what k3s and RKE2 use.
	ScryptXCrypto
)

func (s Scrypt) String() string {
	switch s {
	case ScryptFast:
		return "nodepass"
	case ScryptXCrypto:
		return "x/crypto"
	}
	return fmt.Sprintf("Scrypt(%d)", uint8(s))
}

// key returns the implementation's Key function, nil for an unknown one.
func (s Scrypt) key() keyFunc {
	switch s {
	case ScryptFast:
		return fastKey
	case ScryptXCrypto:
		return xcryptoKey
	}
	return nil
}

// CompareHashAndPassword is the package-level CompareHashAndPassword with
// this implementation and the limits l.
func (s Scrypt) CompareHashAndPassword(hash, password string, l Limits) error {
	kdf := s.key()
	if kdf == nil {
		return fmt.Errorf("verify: unknown %v", s)
	}
	h, err := parseHash(hash, l)
	if err != nil {
		return err
	}
	return h.compare(password, kdf)
}

// batch returns the implementation's batch function: scrypt.KeyBatch, or
// x/crypto's Key for each job in turn.
func (s Scrypt) batch() func([]scrypt.Job) {
	if s == ScryptXCrypto {
		return func(jobs []scrypt.Job) {
			for i := range jobs {
				j := &jobs[i]
				j.Key, j.Err = xscrypt.Key(j.Password, j.Salt, j.N, j.R, j.P, j.KeyLen)
			}
		}
	}
	return scrypt.KeyBatch
}

// keyFunc is scrypt.Key's signature, which this module's scrypt package
// and golang.org/x/crypto/scrypt share.
type keyFunc func(password, salt []byte, N, r, p, keyLen int) ([]byte, error)

var (
	fastKey    keyFunc = scrypt.Key
	xcryptoKey keyFunc = xscrypt.Key
)

func generate(password string, p Params, lim Limits, kdf keyFunc) (string, error) {
	if err := p.validate(lim); err != nil {
		return "", err
	}
	salt := make([]byte, p.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("verify: reading random salt: %w", err)
	}
	key, err := kdf([]byte(password), salt, 1<<p.LogN, p.R, p.P, p.KeyLen)
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
	if _, _, err := cost(p.LogN, p.R, p.P, lim); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidParams, err)
	}
	return nil
}

// cost returns 128·r·N and 128·r·N·p, or an error when either passes its
// limit. It never overflows: every product is checked against the limit
// before it is formed.
func cost(logN, r, p int, lim Limits) (memory, work int64, err error) {
	maxMem, maxWork := lim.memory(), lim.work()
	if logN < 1 || logN > maxLogN {
		return 0, 0, fmt.Errorf("logN %d out of range 1..%d", logN, maxLogN)
	}
	if r < 1 || p < 1 {
		return 0, 0, fmt.Errorf("r and p must be at least 1 (r=%d, p=%d)", r, p)
	}
	perBlock := int64(128) << logN // 128·N, at most 2^37
	if int64(r) > maxMem/perBlock {
		return 0, 0, fmt.Errorf("memory 128·r·N (logN=%d, r=%d) exceeds limit %d bytes", logN, r, maxMem)
	}
	memory = perBlock * int64(r)
	if int64(p) > maxWork/memory {
		return 0, 0, fmt.Errorf("work 128·r·N·p (logN=%d, r=%d, p=%d) exceeds limit %d bytes", logN, r, p, maxWork)
	}
	// x/crypto/scrypt refuses r·p >= 2^30; with the limits above that
	// cannot happen unless the limits are raised far beyond their defaults.
	if int64(r)*int64(p) >= 1<<30 {
		return 0, 0, fmt.Errorf("r·p = %d·%d too large for scrypt", r, p)
	}
	return memory, memory * int64(p), nil
}

// parseHash parses a stored hash and checks it against lim. It does no
// scrypt work. Errors wrap ErrInvalidHash and say which field is wrong
// without repeating the hash itself.
func parseHash(s string, lim Limits) (hash, error) {
	var h hash
	if len(s) > maxHashLen {
		return h, fmt.Errorf("%w: %d bytes long, limit %d", ErrInvalidHash, len(s), maxHashLen)
	}
	var f [6]string
	n := 0
	for part := range strings.SplitSeq(s, ":") {
		if n == len(f) {
			return h, fmt.Errorf("%w: more than %d fields", ErrInvalidHash, len(f))
		}
		f[n] = part
		n++
	}
	if n != len(f) {
		return h, fmt.Errorf("%w: %d fields, want %d", ErrInvalidHash, n, len(f))
	}
	if f[0] != "$1" {
		return h, fmt.Errorf("%w: unsupported version field (want $1)", ErrInvalidHash)
	}
	if f[1] == "" {
		return h, fmt.Errorf("%w: empty salt", ErrInvalidHash)
	}
	if len(f[1]) > 2*maxSaltLen {
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
	if h.memory, h.work, err = cost(h.logN, h.r, h.p, lim); err != nil {
		return h, fmt.Errorf("%w: %v", ErrInvalidHash, err)
	}
	if f[5] == "" {
		return h, fmt.Errorf("%w: empty key", ErrInvalidHash)
	}
	key, err := base64.RawStdEncoding.Strict().DecodeString(f[5])
	if err != nil {
		return h, fmt.Errorf("%w: key is not unpadded standard base64: %v", ErrInvalidHash, err)
	}
	// The decoder skips CR and LF; a stored key must not contain them.
	if strings.ContainsAny(f[5], "\r\n") {
		return h, fmt.Errorf("%w: key contains a line break", ErrInvalidHash)
	}
	if len(key) < minKeyLen || len(key) > maxKeyLen {
		return h, fmt.Errorf("%w: key is %d bytes, want %d..%d", ErrInvalidHash, len(key), minKeyLen, maxKeyLen)
	}
	h.salt, h.key = salt, key
	return h, nil
}

// parseField parses a non-negative decimal of at most 9 digits in the
// canonical form k3s writes (%d); signs, spaces, leading zeros and other
// forms strconv would accept are refused.
func parseField(name, s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty %s", ErrInvalidHash, name)
	}
	if len(s) > 9 {
		return 0, fmt.Errorf("%w: %s has more than 9 digits", ErrInvalidHash, name)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %s is not a decimal number", ErrInvalidHash, name)
		}
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, fmt.Errorf("%w: %s has a leading zero", ErrInvalidHash, name)
	}
	v, err := strconv.Atoi(s)
	if err != nil { // unreachable after the checks above
		return 0, fmt.Errorf("%w: %s: %v", ErrInvalidHash, name, err)
	}
	return v, nil
}

// CompareHashAndPassword compares a stored k3s/RKE2 hash with a password.
// It returns nil on a match, an error wrapping ErrMismatchedHashAndPassword
// on a mismatch, and an error wrapping ErrInvalidHash when the hash is
// malformed or exceeds the default Limits. The key comparison takes
// constant time.
func CompareHashAndPassword(hash, password string) error {
	return Limits{}.CompareHashAndPassword(hash, password)
}

// CompareHashAndPassword is the package-level CompareHashAndPassword with
// the limits l instead of the defaults.
func (l Limits) CompareHashAndPassword(hash, password string) error {
	return ScryptFast.CompareHashAndPassword(hash, password, l)
}

func (h *hash) compare(password string, kdf keyFunc) error {
	derived, err := kdf([]byte(password), h.salt, 1<<h.logN, h.r, h.p, len(h.key))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidHash, err)
	}
	if subtle.ConstantTimeCompare(derived, h.key) != 1 {
		return ErrMismatchedHashAndPassword
	}
	return nil
}
