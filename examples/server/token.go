package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/nodepass/nodepass/verify"
)

// loadTokenFile loads -token-file into v (Verifier.LoadTokens): a k3s
// passwd file (password,user,uid[,groups] per line), or a file holding
// one token, which it reads as k3s's --token-file (see tokenPasswd).
// A file of one line is a token unless it has a comma and does not start
// with K10: a passwd line needs at least three fields.
func loadTokenFile(ctx context.Context, v *verify.Verifier, path, program string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("server: -token-file: %w", err)
	}
	passwd := b
	if token := strings.TrimSpace(string(b)); token != "" && !strings.Contains(token, "\n") &&
		(!strings.Contains(token, ",") || strings.HasPrefix(token, k10)) {
		if passwd, err = tokenPasswd(token, program); err != nil {
			return fmt.Errorf("server: -token-file %s: %w", path, err)
		}
	}
	if err := v.LoadTokens(ctx, bytes.NewReader(passwd)); err != nil {
		return fmt.Errorf("server: -token-file %s: %w", path, err)
	}
	return nil
}

// k10 starts a full k3s token: K10<CA hash>::<user>:<password>.
const k10 = "K10"

// tokenPasswd returns the passwd file a k3s server writes from its token
// (the --token-file's content, trimmed of white space: k3s
// pkg/util/file.go ReadFile). k3s pkg/daemons/control/deps/deps.go
// genUsers gives the user "server" the token and the user "node" the
// password of a token that parses as user:password (getNodePass), else
// the token; pkg/passwd/passwd.go EnsureUser then cuts a K10 token's
// "K10...::<user>:" off the password of that user, and Write writes the
// file with encoding/csv, which quotes what needs it. So a token holding
// "cluster-secret", quotes included, is the password "cluster-secret",
// quotes included.
//
// A token that starts with K10 but that k3s's agents cannot parse (see
// parseToken) is refused: no agent could join with it.
func tokenPasswd(token, program string) ([]byte, error) {
	password, err := parseToken(token)
	if err != nil {
		return nil, err
	}
	nodePass := token
	if password != "" {
		nodePass = password
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for _, u := range []struct{ name, role, password string }{
		{"node", program + ":agent", nodePass},
		{"server", program + ":server", token},
	} {
		if i := strings.Index(u.password, "::"+u.name+":"); i > 0 && strings.HasPrefix(u.password, k10) {
			u.password = u.password[i+len("::"+u.name+":"):]
		}
		if u.password == "" {
			return nil, fmt.Errorf("the token gives the user %q an empty password", u.name)
		}
		w.Write([]string{u.password, u.name, u.name, u.role})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// bootstrapToken is a kubeadm bootstrap token (k8s.io/cluster-bootstrap
// token/api BootstrapTokenPattern), which k3s's agents send as a bearer
// token, not as a user and password.
var bootstrapToken = regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`)

// parseToken reads a token as k3s pkg/clientaccess/token.go parseToken
// does and returns its password, or "" for a bootstrap token: a bare token is the password of no user name; a K10
// token is K10<CA hash>::<creds> (the hash 64 characters or none) or
// K10<creds>, the creds a bootstrap token or <user>:<password> with a
// password. Unlike k3s's server, which takes such a token as a bare
// password, it refuses a K10 token k3s's parser refuses.
func parseToken(token string) (password string, err error) {
	creds, ok := strings.CutPrefix(token, k10)
	if !ok {
		if bootstrapToken.MatchString(token) {
			return "", nil
		}
		return token, nil
	}
	if hash, rest, ok := strings.Cut(creds, "::"); ok {
		if len(hash) != 0 && len(hash) != 64 {
			return "", fmt.Errorf("a K10 token whose CA hash has %d characters, not 64 (k3s's agents refuse it)", len(hash))
		}
		creds = rest
	}
	if bootstrapToken.MatchString(creds) {
		return "", nil
	}
	_, password, ok = strings.Cut(creds, ":")
	if !ok || password == "" {
		return "", errors.New("a K10 token, but not K10<CA hash>::<user>:<password> (k3s's agents refuse it)")
	}
	return password, nil
}
