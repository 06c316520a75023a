package bench

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"
)

// TestCertificateValidity checks that the servers' CA issues what k3s
// issues to agents (rancher/dynamiclistener cert/cert.go NewSignedCert,
// which k3s's pkg/server/handlers/handlers.go calls): NotAfter a year
// from issue; NotBefore max(now - 1 h, the CA's NotBefore) by today's
// rule (dynamiclistener cert/validity.go CalculateNotBefore), or the CA's
// NotBefore by the older releases' rule. The CA itself is valid ten years
// from its creation (NewSelfSignedCACert). It checks every certificate the
// harness makes: the servers' own, both kubelet certificates, a
// component's, and the four an earlier join leaves on disk.
func TestCertificateValidity(t *testing.T) {
	const year = 365 * 24 * time.Hour
	for _, c := range []struct {
		name        string
		age         time.Duration
		caNotBefore bool
		notBefore   time.Duration // relative to now
	}{
		{"today, CA 3 years old", 3 * year, false, -time.Hour},
		{"today, CA 10 minutes old", 10 * time.Minute, false, -10 * time.Minute},
		{"older releases, CA 3 years old", 3 * year, true, -3 * year},
		{"older releases, CA 8 years old", 8 * year, true, -8 * year},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now() // the bubble's: it does not move here
				ca, err := newBenchCA(c.age, c.caNotBefore)
				if err != nil {
					t.Fatal(err)
				}
				if !ca.cert.NotBefore.Equal(now.Add(-c.age)) || !ca.cert.NotAfter.Equal(now.Add(-c.age).Add(10*year)) {
					t.Errorf("CA valid %v to %v; want %v to ten years later", ca.cert.NotBefore, ca.cert.NotAfter, now.Add(-c.age))
				}
				certs := map[string][]byte{"server": ca.tls.Certificates[0].Certificate[0]}
				k, err := newAgentKey("node-1")
				if err != nil {
					t.Fatal(err)
				}
				for name, issue := range map[string]func() ([]byte, error){
					"serving-kubelet POST": func() ([]byte, error) { return ca.kubeletCert("node-1", false, true, k.csrs[stepServingCert]) },
					"client-kubelet GET":   func() ([]byte, error) { return ca.kubeletCert("node-1", true, false, nil) },
					"kube-proxy":           func() ([]byte, error) { return ca.componentCert(stepProxyCert, k.csrs[stepProxyCert]) },
				} {
					out, err := issue()
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					b, _ := pem.Decode(out)
					certs[name] = b.Bytes
				}
				dir := t.TempDir()
				if err := ca.earlierJoin(dir, "node-1"); err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{"serving-kubelet", "client-kubelet", "client-kube-proxy", "client-k3s-controller"} {
					out, err := os.ReadFile(filepath.Join(dir, f+".crt"))
					if err != nil {
						t.Fatal(err)
					}
					b, _ := pem.Decode(out)
					certs["on disk: "+f] = b.Bytes
				}
				for name, der := range certs {
					cert, err := x509.ParseCertificate(der)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if !cert.NotBefore.Equal(now.Add(c.notBefore)) || !cert.NotAfter.Equal(now.Add(year)) {
						t.Errorf("%s: valid %v to %v; want %v to %v", name, cert.NotBefore, cert.NotAfter, now.Add(c.notBefore), now.Add(year))
					}
					if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.pool(), CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				}
			})
		})
	}
}

// TestCAAgeValidated: a CA the servers could not use (older than its ten
// years allow a run to use, or from the future) is refused.
func TestCAAgeValidated(t *testing.T) {
	for _, age := range []time.Duration{-time.Hour, 10 * 365 * 24 * time.Hour} {
		if err := (Scenario{CAAge: age}).WithDefaults().Validate(); err == nil {
			t.Errorf("CA age %v: no error", age)
		}
	}
	if sc := (Scenario{}).WithDefaults(); sc.CAAge != DefaultCAAge || sc.Validate() != nil {
		t.Errorf("default CA age %v: %v", sc.CAAge, sc.Validate())
	}
}
