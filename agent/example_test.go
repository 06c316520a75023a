package agent_test

import (
	"context"
	"fmt"
	"time"

	"github.com/nodepass/nodepass/agent"
)

// The waits of an agent after failures in a row, and after a server's
// Retry-After.
func ExampleBackoff() {
	b := agent.Backoff{Base: time.Second, Cap: 15 * time.Second}
	for range 6 {
		b.Next(0) // within [0, 1s), [0, 2s), [0, 4s), [0, 8s), then [0, 15s)
	}
	d := b.Next(20 * time.Second) // Retry-After: 20, bounded by the cap, jitter on top
	fmt.Println(d >= 15*time.Second && d < 30*time.Second)
	b.Reset() // after a successful attempt
	fmt.Println(b.Next(0) < time.Second)
	// Output:
	// true
	// true
}

func ExampleClient() {
	c, err := agent.New(&agent.Options{
		Server:   "https://10.0.0.1:6443",
		Token:    "K10<hash>::server:<secret>", // a server's /var/lib/rancher/k3s/server/node-token
		NodeName: "worker-1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, cr := range res.Certs {
		fmt.Println(cr.CertFile, cr.Verdict.State, "until", cr.Verdict.NotAfter)
	}
	go c.Renew(ctx)
}
