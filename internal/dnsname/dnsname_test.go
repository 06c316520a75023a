package dnsname

import (
	"strings"
	"testing"
)

// TestSubdomain: the rule as k8s.io/apimachinery's
// validation.IsDNS1123Subdomain states it. kube's
// TestSubdomainAsAPIMachinery compares the two on these names and more
// (this module does not require apimachinery).
func TestSubdomain(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "a.b": true, "a-b.c-d": true, "0.1": true, "a--b": true,
		"worker-1.node-password.k3s": true, strings.Repeat("a", 253): true,
		strings.Repeat("a", 64) + ".c": true, // labels are not bounded
		strings.Repeat("a", 254):       false, "": false, ".": false, "a.": false,
		".a": false, "a..b": false, "-a": false, "a-": false, "a.-b": false,
		"a-.b": false, "a_b": false, "A": false, "ä": false, "a b": false,
	} {
		if got := Subdomain(name); got != want {
			t.Errorf("Subdomain(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSubdomainAllocatesNothing: verify checks every request's node name.
func TestSubdomainAllocatesNothing(t *testing.T) {
	name := strings.Repeat("worker-1.", 20) + "k3s"
	if n := testing.AllocsPerRun(100, func() { Subdomain(name) }); n != 0 {
		t.Errorf("Subdomain allocates %v times, want 0", n)
	}
}
