package loadbalancer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// addressesOf lists the servers' addresses, in Stats order.
func addressesOf(lb *LoadBalancer) []string {
	var out []string
	for _, s := range lb.Stats() {
		out = append(out, s.Address)
	}
	return out
}

func TestStateFile(t *testing.T) {
	t.Parallel()
	// The servers need not answer: these tests read the list only.
	const a, b, c = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	opts := func(t *testing.T, path, def string, servers ...string) *Options {
		o := testOptions(t, def, servers...)
		o.StateFile = path
		return o
	}
	load := func(t *testing.T, path string) statefile.Servers {
		t.Helper()
		st, err := statefile.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "etc", "k3s-agent-load-balancer.json")
		newLB(t, opts(t, path, a, a, b))
		if st := load(t, path); st.Default != "https://"+a || !slices.Equal(st.Addresses, []string{a, b}) {
			t.Errorf("written %+v", st)
		}
	})
	t.Run("read back", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "lb.json")
		first := newLB(t, opts(t, path, a, a))
		if err := first.Update([]string{a, b, c}); err != nil {
			t.Fatal(err)
		}
		first.Close()
		// Restarted with only the configured server, it knows all three.
		lb := newLB(t, opts(t, path, a))
		if got := addressesOf(lb); !slices.Equal(got, []string{a, b, c}) {
			t.Errorf("after a restart: %v, want %v", got, []string{a, b, c})
		}
	})
	t.Run("k3s's file", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "k3s-agent-load-balancer.json")
		k3s := "{\n  \"ServerURL\": \"https://" + a + "\",\n  \"ServerAddresses\": [\n    \"" + b + "\",\n    \"" + c + "\"\n  ]\n}"
		if err := os.WriteFile(path, []byte(k3s), 0o600); err != nil {
			t.Fatal(err)
		}
		lb := newLB(t, opts(t, path, a))
		if got := addressesOf(lb); !slices.Equal(got, []string{a, b, c}) {
			t.Errorf("from k3s's file: %v", got)
		}
		if !statsOf(t, lb, a).Standby {
			t.Error("the default, not in k3s's list, is not a standby")
		}
		// And k3s can read ours.
		var back struct{ ServerURL string }
		data, _ := os.ReadFile(path)
		if err := json.Unmarshal(data, &back); err != nil || back.ServerURL != "https://"+a {
			t.Errorf("written %s (%v)", data, err)
		}
	})
	t.Run("another server's", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "lb.json")
		if err := statefile.Save(path, statefile.Servers{Default: "https://" + b, Addresses: []string{b, c}}); err != nil {
			t.Fatal(err)
		}
		lb := newLB(t, opts(t, path, a))
		if got := addressesOf(lb); !slices.Equal(got, []string{a}) {
			t.Errorf("with another server's file: %v, want only %s", got, a)
		}
		if len(logged(lb, "for another server")) != 1 {
			t.Error("not logged")
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "lb.json")
		if err := os.WriteFile(path, []byte(`{"ServerURL": "https://`+a+`", "ServerAdd`), 0o600); err != nil {
			t.Fatal(err)
		}
		lb := newLB(t, opts(t, path, a, b))
		if got := addressesOf(lb); !slices.Equal(got, []string{a, b}) {
			t.Errorf("with a corrupt file: %v", got)
		}
		recs := logged(lb, "ignoring the state file")
		if len(recs) != 1 || !strings.Contains(recordText(recs[0]), "corrupt") {
			t.Errorf("logged %v", recs)
		}
		if st := load(t, path); !slices.Equal(st.Addresses, []string{b}) {
			t.Errorf("not rewritten: %+v", st)
		}
	})
	// A state file that cannot be written (a read-only or full disk, a
	// directory in the way) is logged; the node still gets its proxy, as
	// Update and the agent's Client go on without it.
	t.Run("unwritable", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "lb.json")
		if err := os.MkdirAll(filepath.Join(path, "in-the-way"), 0o700); err != nil {
			t.Fatal(err)
		}
		b := newBackend(t, "b")
		lb := newLB(t, opts(t, path, b.addr))
		if got := whoCounts(t, lb.Addr(), 2); got["b"] != 2 {
			t.Errorf("through the load balancer: %v", got)
		}
		if len(logged(lb, "not saved")) != 1 {
			t.Error("not logged")
		}
	})
	// A reader never sees a part of the file, however many Updates write it.
	t.Run("atomic", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "lb.json")
		lb := newLB(t, opts(t, path, a))
		lists := [][]string{{a, b}, {b, c}, {a, b, c}, {c}}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		reads := 0
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := statefile.Load(path); err != nil {
					t.Error(err)
					return
				}
				reads++
			}
		})
		for i := range 200 {
			if err := lb.Update(lists[i%len(lists)]); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		if st := load(t, path); !slices.Equal(st.Addresses, lists[199%len(lists)]) {
			t.Errorf("the file holds %v, want the last list", st.Addresses)
		}
		ents, _ := os.ReadDir(filepath.Dir(path))
		if len(ents) != 1 {
			t.Errorf("%d files beside the state file", len(ents)-1)
		}
		t.Logf("%d whole reads during 200 updates", reads)
	})
}
