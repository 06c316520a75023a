package httpauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nodepass/nodepass/httpauth"
)

// FuzzHeaders sends arbitrary node-header values straight into the
// middleware: it must never panic, must answer 200 only when the Verifier
// accepted, and must hand the Verifier exactly the lower-cased name and the
// password it was sent.
func FuzzHeaders(f *testing.F) {
	f.Add("worker-1", "0123456789abcdef0123456789abcdef", "10.0.0.1", true)
	f.Add("WORKER-1", "pw", "", false)
	f.Add("", "pw", "", true)
	f.Add("n", "", "", true)
	f.Add("ǅ-node", "pw", "::1,10.0.0.1", true)
	f.Add("n\x00x", "p\r\nw", "\xff", false)
	f.Fuzz(func(t *testing.T, name, password, ip string, accept bool) {
		var called bool
		var gotName, gotPassword string
		v := verifierFunc(func(_ context.Context, node, pw string) error {
			called, gotName, gotPassword = true, node, pw
			if accept {
				return nil
			}
			return errMismatch
		})
		a, err := httpauth.New(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		var handled bool
		h := a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handled = true
			n, ok := httpauth.NodeFromContext(r.Context())
			if !ok || n.Name != gotName || n.IP != ip {
				t.Fatalf("context node %+v, want %q %q", n, gotName, ip)
			}
		}))
		req := httptest.NewRequest(http.MethodGet, "/v1-k3s/serving-kubelet.crt", nil)
		req.Header["K3s-Node-Name"] = []string{name}
		req.Header["K3s-Node-Password"] = []string{password}
		req.Header["K3s-Node-Ip"] = []string{ip}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		if name == "" || password == "" {
			if called || rec.Code != http.StatusBadRequest {
				t.Fatalf("missing header: called %v, status %d", called, rec.Code)
			}
			return
		}
		if !called || gotName != strings.ToLower(name) || gotPassword != password {
			t.Fatalf("Verifier got (%q, %q), called %v", gotName, gotPassword, called)
		}
		if handled != accept || (rec.Code == http.StatusOK) != accept {
			t.Fatalf("accept %v: handled %v, status %d", accept, handled, rec.Code)
		}
	})
}
