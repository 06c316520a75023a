// Package dnsname holds the one check of a Kubernetes object name that
// verify (on every request) and kube (for the Secret it names) both make.
package dnsname

// MaxSubdomain is the longest DNS-1123 subdomain, in bytes.
const MaxSubdomain = 253

// Subdomain reports whether name is a DNS-1123 subdomain, as
// k8s.io/apimachinery's validation.IsDNS1123Subdomain decides, without
// its regular expression: 1 to 253 bytes, labels of lower-case letters,
// digits and '-' separated by '.', each starting and ending with a
// letter or digit. It allocates nothing.
func Subdomain(name string) bool {
	if len(name) == 0 || len(name) > MaxSubdomain {
		return false
	}
	prev := byte('.') // the name starts a label
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && prev != '.', c == '.' && prev != '.' && prev != '-':
		default:
			return false
		}
		prev = c
	}
	return prev != '.' && prev != '-'
}
