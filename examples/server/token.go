package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nodepass/nodepass/verify"
)

// loadTokenFile loads -token-file into v (Verifier.LoadTokens): a k3s
// passwd file (password,user,uid[,groups] per line), or a file holding
// one token, as k3s's --token-file does: a bare password, which agents
// send as the user "node", or a full token K10<CA hash>::<user>:<password>
// (the CA hash is the agents' to check).
func loadTokenFile(ctx context.Context, v *verify.Verifier, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("server: -token-file: %w", err)
	}
	passwd := b
	if line := strings.TrimSpace(string(b)); line != "" && !strings.ContainsAny(line, ",\n") {
		user, password := "node", line
		if rest, ok := strings.CutPrefix(line, "K10"); ok {
			_, creds, ok := strings.Cut(rest, "::")
			if user, password, ok = strings.Cut(creds, ":"); !ok || user == "" || password == "" {
				return fmt.Errorf("server: -token-file %s: a K10 token, but not K10<hash>::<user>:<password>", path)
			}
		}
		passwd = []byte(password + "," + user + "," + user + "\n")
	}
	if err := v.LoadTokens(ctx, bytes.NewReader(passwd)); err != nil {
		return fmt.Errorf("server: -token-file %s: %w", path, err)
	}
	return nil
}
