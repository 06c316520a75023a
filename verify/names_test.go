package verify

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestNodeNamesMakeSecretNames: a node name is refused unless
// strings.ToLower(node + ".node-password.k3s"), the name of the secret k3s
// keeps its hash in, is a DNS-1123 subdomain, whatever the store: no
// wildcard, space, slash or other character a Kubernetes name cannot
// have reaches the store (or a certificate signed for the name).
func TestNodeNamesMakeSecretNames(t *testing.T) {
	s := newCountingStore()
	v := newTestVerifier(t, s, nil)
	ctx := context.Background()
	longest := strings.Repeat("a", 253-len(".node-password.k3s"))
	for _, node := range []string{
		"*", "*.example.com", "bad name", "a/b", "a_b", "-a", "a-", ".a", "a.", "a..b", "a.-b", "a-.b",
		"ünïcode", "a:b", "a\\b", longest + "a",
	} {
		for _, call := range []func(context.Context, string, string) error{v.Verify, v.Ensure} {
			if err := call(ctx, node, "pw"); !errors.Is(err, ErrInvalidInput) {
				t.Errorf("node %q: %v, want ErrInvalidInput", node, err)
			}
		}
	}
	if g, c := s.gets.Load(), s.creates.Load(); g != 0 || c != 0 {
		t.Fatalf("invalid names reached the store: %d reads, %d creates", g, c)
	}
	for _, node := range []string{"a", "1", "node-1", "Node-1", "worker-1.example.com", "a.b-c.d", longest} {
		if err := v.Ensure(ctx, node, "pw"); err != nil {
			t.Errorf("node %q: %v", node, err)
		}
	}
}
