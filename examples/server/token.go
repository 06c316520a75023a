package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"strings"

	"github.com/nodepass/nodepass/internal/k3stoken"
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
		(!strings.Contains(token, ",") || strings.HasPrefix(token, k3stoken.Prefix)) {
		if passwd, err = tokenPasswd(token, program); err != nil {
			return fmt.Errorf("server: -token-file %s: %w", path, err)
		}
	}
	if err := v.LoadTokens(ctx, bytes.NewReader(passwd)); err != nil {
		return fmt.Errorf("server: -token-file %s: %w", path, err)
	}
	return nil
}

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
// A token that starts with K10 but that k3s's agents cannot parse
// (k3stoken.Parse, as k3s pkg/clientaccess/token.go parseToken) is
// refused: no agent could join with it. Unlike k3s's server, which takes
// such a token as a bare password.
func tokenPasswd(token, program string) ([]byte, error) {
	t, err := k3stoken.Parse(token)
	if err != nil {
		return nil, fmt.Errorf("%w (k3s's agents refuse it)", err)
	}
	nodePass := token
	if t.Password != "" {
		nodePass = t.Password
	}
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for _, u := range []struct{ name, role, password string }{
		{"node", program + ":agent", nodePass},
		{"server", program + ":server", token},
	} {
		if i := strings.Index(u.password, "::"+u.name+":"); i > 0 && strings.HasPrefix(u.password, k3stoken.Prefix) {
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
