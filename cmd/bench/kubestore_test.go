package main

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/kube/apitest"
)

func TestRequestKind(t *testing.T) {
	for _, c := range []struct{ method, url, want string }{
		{"GET", "/api/v1/namespaces/kube-system/secrets?limit=500", "list"},
		{"GET", "/api/v1/namespaces/kube-system/secrets?watch=true&resourceVersion=1", "watch"},
		{"GET", "/api/v1/namespaces/kube-system/secrets/a.node-password.k3s", "get"},
		{"POST", "/api/v1/namespaces/kube-system/secrets", "create"},
		{"GET", "/api", "other"},
	} {
		u, err := url.Parse("https://127.0.0.1" + c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestKind(&http.Request{Method: c.method, URL: u}); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.method, c.url, got, c.want)
		}
	}
}

func TestStoreKubeNeedsBinaries(t *testing.T) {
	t.Setenv(apitest.BinEnv, "")
	code, _, stderr := runCmd(t, "-store", "kube", "-nodes", "2", "-logn", "4")
	if code != 1 || !strings.Contains(stderr, "-store kube") || !strings.Contains(stderr, "make apiserver") {
		t.Errorf("exit %d, stderr %q; want 1 and how to build the binaries", code, stderr)
	}
	code, _, stderr = runCmd(t, "-store", "kube", "-apiserver-bin", t.TempDir(), "-nodes", "2", "-logn", "4")
	if code != 1 || !strings.Contains(stderr, "no etcd in") {
		t.Errorf("exit %d, stderr %q; want 1 and the missing binary", code, stderr)
	}
	if code, _, stderr := runCmd(t, "-store", "disk"); code != 2 || !strings.Contains(stderr, `-store "disk"`) {
		t.Errorf("-store disk: exit %d, stderr %q; want 2", code, stderr)
	}
}

// TestAPIServerStoreKube runs a small herd with -store kube against a real
// kube-apiserver. It skips unless $NODEPASS_APISERVER_BIN names the built
// binaries (make test-apiserver).
func TestAPIServerStoreKube(t *testing.T) {
	if _, err := apitest.BinDir(""); errors.Is(err, apitest.ErrNoBinaries) {
		t.Skipf("needs a real kube-apiserver: %v", err)
	}
	code, stdout, stderr := runCmd(t, "-store", "kube", "-nodes", "40", "-logn", "6", "-mode", "inproc", "-agent", "backoff")
	t.Logf("stderr:\n%s\nstdout:\n%s", stderr, stdout)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	rows := 0
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || (f[0] != "memory" && f[0] != "kube") {
			continue
		}
		rows++
		if f[2] != "40/40" {
			t.Errorf("%s %s: joined %s, want 40/40", f[0], f[1], f[2])
		}
		// Enrolling creates a secret per node (a retry after a client
		// timeout may try again); a reboot creates none.
		creates, err := strconv.ParseFloat(f[7], 64)
		if err != nil || (f[1] == "enroll") != (creates >= 1) || (f[1] == "reboot") != (creates == 0) {
			t.Errorf("%s %s: %s Create per join, want at least 1 enrolling and 0 rebooting", f[0], f[1], f[7])
		}
	}
	if rows != 4 {
		t.Errorf("%d result rows, want 4 (memory and kube, enroll and reboot)", rows)
	}
}
