package verify

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Join tokens. An agent sends its token on every request but /cacerts, as
// basic auth "node:<password>", and upstream runs scrypt against each
// token's hash every time, about seven per agent attempt. VerifyToken
// checks it as node passwords are: cached, shared, a user's other
// passwords refused once one is verified, and each user a name of its
// own in the queue, so a token guesser gets a user's share and no more.

// tokenPrefix starts a token user's name (see request.go). No node name
// has a NUL (checkCredentials), so no user shares a name with a node.
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

// tokens returns where VerifyToken reads: Options.Tokens, what LoadTokens
// loaded, or nil.
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
	defer v.storeDone("token Get", user, &err)
	return tokens.Get(ctx, user)
}

// tokenName returns user's name, tokenPrefix and user, kept for each user
// the store had so that a cache hit allocates nothing.
func (v *Verifier) tokenName(user string) string {
	if n, ok := v.tokenNames.Load(user); ok {
		return n.(string)
	}
	n, _ := v.tokenNames.LoadOrStore(user, tokenPrefix+user)
	return n.(string)
}

// displayName is how a name appears in error messages (a hash never).
func displayName(name string) string {
	if user, ok := strings.CutPrefix(name, tokenPrefix); ok {
		return fmt.Sprintf("token user %q", user)
	}
	if hashName(name) {
		return "the hash given"
	}
	return fmt.Sprintf("node %q", name)
}

// hashName reports whether name is a hash, the Hasher's name for a call
// (no node name starts with "$").
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
		name := v.tokenName(e.user) // hashOnly recorded it under the hash's name
		v.recordMatch(name, h, v.cache.Key(name, h, password), v.opts.Params.KeyLen)
		s.Set(e.user, h)
	}
	v.loaded.Store(s)
	return nil
}

// tokenEntry is one line of a passwd file.
type tokenEntry struct{ user, password string }

// parseTokenFile reads a passwd file's users and passwords.
func (v *Verifier) parseTokenFile(r io.Reader) ([]tokenEntry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
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
		entries = append(entries, tokenEntry{user: rec[1], password: rec[0]})
	}
	if len(entries) == 0 {
		return nil, errors.New("verify: token file holds no token")
	}
	return entries, nil
}
