package agent

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// certOnDisk writes a certificate for l signed by ca, and a key, and
// returns their files; the certificate is for key (nil: a key of its
// own, the one written).
func certOnDisk(t *testing.T, ca *testCA, l leaf, key *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	dir := t.TempDir()
	own, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if key == nil {
		key = own
	}
	certFile, keyFile = filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
	if err := os.WriteFile(certFile, ca.issue(t, l, key.Public()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pemKey(t, own), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestCertRule(t *testing.T) {
	ca, other := newTestCA(t, "ca"), newTestCA(t, "other")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	now := time.Now()
	serving := leaf{cn: "worker-1", dns: "worker-1", usage: x509.ExtKeyUsageServerAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(year)}
	client := leaf{cn: "system:node:worker-1", usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(year)}
	servingRule := CertRule{Name: "worker-1", Usage: x509.ExtKeyUsageServerAuth, Roots: roots}
	clientRule := CertRule{Name: "system:node:worker-1", Usage: x509.ExtKeyUsageClientAuth, Roots: roots}
	wrongKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	withIPs := func(r CertRule, ips ...string) CertRule {
		for _, ip := range ips {
			r.IPs = append(r.IPs, net.ParseIP(ip))
		}
		return r
	}
	addressed := func(l leaf, ips ...string) leaf {
		for _, ip := range ips {
			l.ips = append(l.ips, net.ParseIP(ip))
		}
		return l
	}
	renaming := func(l leaf, cn, dns string) leaf { l.cn, l.dns = cn, dns; return l }
	timed := func(l leaf, from, to time.Duration) leaf {
		l.notBefore, l.notAfter = now.Add(from), now.Add(to)
		return l
	}
	// writtenAt is a certificate on disk, its file written at when.
	writtenAt := func(l leaf, when time.Time) func() (string, string) {
		return func() (string, string) {
			c, k := certOnDisk(t, ca, l, nil)
			if err := os.Chtimes(c, when, when); err != nil {
				t.Fatal(err)
			}
			return c, k
		}
	}

	for _, tc := range []struct {
		name  string
		files func() (string, string)
		rule  CertRule
		want  CertState
	}{
		{"valid serving", func() (string, string) { return certOnDisk(t, ca, serving, nil) }, servingRule, CertValid},
		{"valid client", func() (string, string) { return certOnDisk(t, ca, client, nil) }, clientRule, CertValid},
		{"serving named by its DNS name only", func() (string, string) {
			return certOnDisk(t, ca, renaming(serving, "something", "worker-1"), nil)
		}, servingRule, CertValid},
		{"expiring: 95 % of its life gone", writtenAt(timed(client, -95*time.Hour, 5*time.Hour), now.Add(-95*time.Hour)),
			clientRule, CertRenewDue},
		{"expired", func() (string, string) { return certOnDisk(t, ca, timed(client, -2*year, -time.Hour), nil) }, clientRule, CertExpired},
		// Written after its NotBefore and read before it: the clock went back.
		{"not yet valid", writtenAt(timed(client, time.Hour, year), now.Add(time.Hour)), clientRule, CertExpired},
		// Written before its NotBefore: the agent's clock lags the server's.
		{"not yet valid when written", writtenAt(timed(client, time.Hour, year), now.Add(-time.Minute)), clientRule, CertValid},
		{"wrong key", func() (string, string) { return certOnDisk(t, ca, client, wrongKey) }, clientRule, CertWrongKey},
		{"wrong name", func() (string, string) { return certOnDisk(t, ca, renaming(client, "system:node:worker-2", ""), nil) },
			clientRule, CertWrongName},
		{"serving with the node's address", func() (string, string) { return certOnDisk(t, ca, addressed(serving, "192.0.2.10"), nil) },
			withIPs(servingRule, "192.0.2.10"), CertValid},
		{"serving with the node's addresses and loopback", func() (string, string) {
			return certOnDisk(t, ca, addressed(serving, "127.0.0.1", "192.0.2.10", "2001:db8::10"), nil)
		}, withIPs(servingRule, "2001:db8::10", "192.0.2.10"), CertValid},
		{"serving without the node's new address", func() (string, string) { return certOnDisk(t, ca, addressed(serving, "192.0.2.10"), nil) },
			withIPs(servingRule, "192.0.2.11"), CertWrongName},
		{"serving without the node's second address", func() (string, string) { return certOnDisk(t, ca, addressed(serving, "192.0.2.10"), nil) },
			withIPs(servingRule, "192.0.2.10", "2001:db8::10"), CertWrongName},
		{"client certificate named by a DNS name", func() (string, string) {
			return certOnDisk(t, ca, renaming(client, "x", "system:node:worker-1"), nil)
		}, clientRule, CertWrongName},
		{"another CA", func() (string, string) { return certOnDisk(t, other, client, nil) }, clientRule, CertOtherCA},
		// k3s sends a certificate followed by its CA (handlers.go
		// signAndSend): the CA a file carries is no proof.
		{"serving, from the CA it carries, not Roots", func() (string, string) { return certOnDisk(t, other, serving, nil) },
			servingRule, CertOtherCA},
		{"no roots", func() (string, string) { return certOnDisk(t, ca, client, nil) }, CertRule{Name: client.cn, Usage: client.usage}, CertOtherCA},
		{"wrong usage", func() (string, string) { return certOnDisk(t, ca, renaming(client, "worker-1", "worker-1"), nil) }, servingRule, CertOtherCA},
		{"corrupt certificate", func() (string, string) {
			c, k := certOnDisk(t, ca, client, nil)
			os.WriteFile(c, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600)
			return c, k
		}, clientRule, CertCorrupt},
		{"truncated certificate", func() (string, string) {
			c, k := certOnDisk(t, ca, client, nil)
			b, _ := os.ReadFile(c)
			os.WriteFile(c, b[:len(b)/3], 0o600)
			return c, k
		}, clientRule, CertCorrupt},
		{"corrupt key", func() (string, string) {
			c, k := certOnDisk(t, ca, client, nil)
			os.WriteFile(k, []byte("not a key"), 0o600)
			return c, k
		}, clientRule, CertCorrupt},
		{"missing certificate", func() (string, string) {
			c, k := certOnDisk(t, ca, client, nil)
			os.Remove(c)
			return c, k
		}, clientRule, CertMissing},
		{"missing key", func() (string, string) {
			c, k := certOnDisk(t, ca, client, nil)
			os.Remove(k)
			return c, k
		}, clientRule, CertMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			certFile, keyFile := tc.files()
			st := tc.rule.Check(certFile, keyFile, now)
			if st.State != tc.want {
				t.Fatalf("State = %v (%v), want %v", st.State, st.Err, tc.want)
			}
			if (st.Err == nil) != (tc.want == CertValid) {
				t.Errorf("Err = %v", st.Err)
			}
			if st.Err != nil && !strings.Contains(st.Err.Error(), certFile) {
				t.Errorf("Err %q does not name %s", st.Err, certFile)
			}
			if tc.name == "another CA" {
				var unknown x509.UnknownAuthorityError
				if !errors.As(st.Err, &unknown) {
					t.Errorf("Err %v does not wrap x509.UnknownAuthorityError", st.Err)
				}
			}
		})
	}
}

// A serving certificate of a kubelet CA of the server's own
// (examples/server) passes with the CA its file carries when the Client
// recorded that file as written against server-ca.crt as it is now
// (carriedFor); not when it recorded another file, nor when the file
// carries no CA.
func TestCertRuleCarriedCA(t *testing.T) {
	ca, kubelet := newTestCA(t, "ca"), newTestCA(t, "kubelet-ca")
	now := time.Now()
	serving := leaf{cn: "worker-1", dns: "worker-1", usage: x509.ExtKeyUsageServerAuth, notBefore: now.Add(-time.Hour), notAfter: now.Add(year)}
	rule := CertRule{Name: "worker-1", Usage: x509.ExtKeyUsageServerAuth, Roots: certPool([]*x509.Certificate{ca.cert})}
	for _, tc := range []struct {
		name     string
		bare     bool // the file holds the certificate alone, not its CA
		recorded func(file []byte) []byte
		want     CertState
	}{
		{"recorded", false, func(b []byte) []byte { return b }, CertValid},
		{"not recorded", false, func([]byte) []byte { return nil }, CertOtherCA},
		{"another file recorded", false, func([]byte) []byte { return []byte("another certificate") }, CertOtherCA},
		{"recorded, but no CA in the file", true, func(b []byte) []byte { return b }, CertOtherCA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, k := certOnDisk(t, kubelet, serving, nil)
			b, _ := os.ReadFile(c)
			if tc.bare {
				first, _ := pem.Decode(b)
				b = pem.EncodeToMemory(first)
				os.WriteFile(c, b, 0o600)
			}
			r := rule
			if rec := tc.recorded(b); rec != nil {
				r.carriedFor = sha256.Sum256(rec)
			}
			if st := r.Check(c, k, now); st.State != tc.want {
				t.Errorf("State = %v (%v), want %v", st.State, st.Err, tc.want)
			}
		})
	}
}

// The renewal times of many certificates spread over 70-90 % of their
// lifetime; each certificate keeps its own on every check.
func TestRenewWindow(t *testing.T) {
	ca := newTestCA(t, "ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	now := time.Now()
	life := 100 * time.Hour
	l := leaf{cn: "n", usage: x509.ExtKeyUsageClientAuth, notBefore: now, notAfter: now.Add(life)}
	rule := CertRule{Name: "n", Usage: x509.ExtKeyUsageClientAuth, Roots: roots}
	var fracs []time.Duration
	for range 300 {
		c, k := certOnDisk(t, ca, l, nil)
		st := rule.Check(c, k, now)
		if st.State != CertValid {
			t.Fatalf("State = %v: %v", st.State, st.Err)
		}
		if again := rule.Check(c, k, now.Add(time.Hour)); !again.RenewAt.Equal(st.RenewAt) {
			t.Fatalf("RenewAt %v, then %v: not the same time", st.RenewAt, again.RenewAt)
		}
		if due := rule.Check(c, k, st.RenewAt); due.State != CertRenewDue {
			t.Fatalf("at RenewAt: %v, want renewal due", due.State)
		}
		fracs = append(fracs, st.RenewAt.Sub(now))
	}
	checkSpread(t, "renewal times", fracs, 70*time.Hour, 90*time.Hour)

	rule.RenewAfter = 0.4 // window 40-80 %
	c, k := certOnDisk(t, ca, l, nil)
	if at := rule.Check(c, k, now).RenewAt.Sub(now); at < 40*time.Hour || at >= 80*time.Hour {
		t.Errorf("RenewAfter 0.4: renewal at %v of 100h", at)
	}
}
