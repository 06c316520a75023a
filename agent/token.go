package agent

import (
	"crypto/sha256"
	"errors"
	"regexp"
	"strings"
)

// token is a k3s join token as an agent uses it (k3s's
// clientaccess.parseToken): K10<CA hash>::<user>:<password>, K10::<creds>,
// a bootstrap token <id>.<secret>, or a bare password. An agent always
// authenticates as the user "node", whatever user the token names.
type token struct {
	caHash   string // hex SHA-256 of the server's CA bundle (see pinCA); empty if the token has none
	password string // basic auth password for the user "node"
	bearer   string // a bootstrap token, sent as a bearer token instead of basic auth
}

const tokenPrefix = "K10"

var bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

func parseToken(s string) (token, error) {
	if s == "" {
		return token{}, errors.New("agent: the token is empty")
	}
	if !strings.HasPrefix(s, tokenPrefix) {
		if bootstrapToken.MatchString(s) {
			return token{bearer: s}, nil
		}
		return token{password: s}, nil
	}
	var t token
	creds := s[len(tokenPrefix):]
	if hash, rest, ok := strings.Cut(creds, "::"); ok {
		if hash != "" && len(hash) != 2*sha256.Size {
			return token{}, errors.New("agent: the token's CA hash is not 64 hex digits")
		}
		t.caHash, creds = strings.ToLower(hash), rest
	}
	if bootstrapToken.MatchString(creds) {
		t.bearer = creds
		return t, nil
	}
	_, pw, ok := strings.Cut(creds, ":")
	if !ok || pw == "" {
		return token{}, errors.New("agent: the token is neither K10<hash>::<user>:<password> nor a bootstrap token")
	}
	t.password = pw
	return t, nil
}
