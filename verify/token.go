package verify

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Join tokens.
//
// A k3s or RKE2 agent sends its join token on every request but
// /cacerts, as basic auth "node:<password>", and the server checks it
// against a scrypt hash of each token it knows (its passwd file, hashed
// when it loads). Upstream runs that scrypt on every request, about
// seven per agent attempt. [Verifier.VerifyToken] checks it with the
// machinery node passwords use: the verified (user, stored hash,
// password) tuple is cached under an HMAC key, so each costs at most one
// scrypt per process; concurrent first checks share one computation; a
// user's other passwords are refused without scrypt once one is
// verified; and computations queue fairly beside the nodes', each user a
// name of its own, so a token guesser gets a user's share of the queue
// and no more.

// tokenPrefix starts the name a token user has in the cache keys, the
// queue and the failure counts. Node names never contain a NUL (see
// checkCredentials), so no user shares a name with a node.
const tokenPrefix = "\x00token\x00"

// maxUserLen bounds a token user's name.
const maxUserLen = 256

// VerifyToken checks a join token, basic auth user:password, against the
// hash Options.Tokens (or LoadTokens) has for user, as Verify checks a
// node's. User names keep their case, as in k3s.
func (v *Verifier) VerifyToken(ctx context.Context, user, password string) error {
	if v.closed.Load() {
		return ErrClosed
	}
	if err := v.checkUser(user, password); err != nil {
		return err
	}
	tokens := v.tokens()
	if tokens == nil {
		return fmt.Errorf("%w: token user %q: the Verifier has no tokens (Options.Tokens, LoadTokens)", ErrNotFound, user)
	}
	stored, err := v.getToken(ctx, tokens, user)
	if err != nil {
		return err
	}
	return v.verifyStored(ctx, v.tokenName(user), stored, hmacKey(password), nil)
}

// checkUser refuses a token user or password no store should see.
func (v *Verifier) checkUser(user, password string) error {
	return v.checkCredentials("token user", user, maxUserLen, "token", password)
}

// tokens returns where VerifyToken reads: Options.Tokens, or what
// LoadTokens loaded; nil if neither.
func (v *Verifier) tokens() Store {
	if v.opts.Tokens != nil {
		return v.opts.Tokens
	}
	if s := v.loaded.Load(); s != nil {
		return s
	}
	return nil
}

// getToken reads user's token hash from tokens.
func (v *Verifier) getToken(ctx context.Context, tokens Store, user string) (stored string, err error) {
	defer v.recoverStore("token Get", user, &err)
	stored, err = tokens.Get(ctx, user)
	return stored, v.storeErr("token Get", user, err)
}

// tokenName returns user's name in the cache keys, the queue and the
// failure counts: tokenPrefix and user. Names are kept, one per user
// whose hash the store had, so that a cache hit allocates nothing.
func (v *Verifier) tokenName(user string) string {
	if n, ok := v.tokenNames.Load(user); ok {
		return n.(string)
	}
	n, _ := v.tokenNames.LoadOrStore(user, tokenPrefix+user)
	return n.(string)
}

// displayName is how a name appears in error messages: a node's as is,
// a token user's as "token user" and the user, a Hasher's (the hash
// itself) as "the hash given".
func displayName(name string) string {
	if user, ok := strings.CutPrefix(name, tokenPrefix); ok {
		return fmt.Sprintf("token user %q", user)
	}
	if hashName(name) {
		return "the hash given"
	}
	return fmt.Sprintf("node %q", name)
}

// hashName reports whether name is a hash, the Hasher's name for a call.
// No node name starts with "$" (secretName).
func hashName(name string) bool { return strings.HasPrefix(name, "$") }

// LoadTokens makes a k3s passwd file (password,user,uid[,groups] lines)
// what VerifyToken checks, each password hashed under ctx. A malformed
// line, a user given twice, or a set Options.Tokens is an error, and
// nothing is loaded.
func (v *Verifier) LoadTokens(ctx context.Context, r io.Reader) error {
	if v.opts.Tokens != nil {
		return errors.New("verify: LoadTokens: Options.Tokens is set; the tokens come from one place")
	}
	entries, err := v.parseTokenFile(r)
	if err != nil {
		return err
	}
	s := NewMemoryStore()
	for _, e := range entries {
		password := hmacKey(e.password)
		h, err := v.hashOnly(ctx, password)
		if err != nil {
			return fmt.Errorf("verify: token file: hashing the token of user %q: %w", e.user, err)
		}
		// The hash was recorded as verified under its own name (see
		// hashOnly); VerifyToken asks under the user's.
		name := v.tokenName(e.user)
		v.recordMatch(name, h, v.cache.Key(name, h, password), v.opts.Params.KeyLen)
		s.Set(e.user, h)
	}
	v.loaded.Store(s)
	return nil
}

// tokenEntry is one line of a passwd file.
type tokenEntry struct{ user, password string }

// parseTokenFile reads a passwd file's users and passwords (see
// LoadTokens).
func (v *Verifier) parseTokenFile(r io.Reader) ([]tokenEntry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	var entries []tokenEntry
	lines := map[string]int{} // user -> the line it was first given on
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			return nil, fmt.Errorf("verify: token file line %d: %v", pe.Line, pe.Err)
		case err != nil:
			return nil, fmt.Errorf("verify: token file: %w", err)
		}
		line, _ := cr.FieldPos(0) // a record read has a field 0
		if len(rec) < 3 {
			return nil, fmt.Errorf("verify: token file line %d: %d fields, want at least 3 (password,user,uid[,groups])", line, len(rec))
		}
		if err := v.checkUser(rec[1], rec[0]); err != nil {
			return nil, fmt.Errorf("verify: token file line %d: %w", line, err)
		}
		if first, dup := lines[rec[1]]; dup {
			return nil, fmt.Errorf("verify: token file line %d: user %q was given on line %d already", line, rec[1], first)
		}
		lines[rec[1]] = line
		entries = append(entries, tokenEntry{user: strings.Clone(rec[1]), password: strings.Clone(rec[0])})
	}
	if len(entries) == 0 {
		return nil, errors.New("verify: token file holds no token")
	}
	return entries, nil
}
