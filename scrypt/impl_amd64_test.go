//go:build amd64 && gc && !purego

package scrypt

// pairImpls are the BlockMix codes for two hashes this build can run, by
// name, for the tests and benchmarks to compare; the first is the default.
func pairImpls() []pairCode {
	var cs []pairCode
	if pairImpl == pairAVX2 {
		cs = append(cs, pairCode{"avx2x2", pairAVX2})
	}
	return append(cs,
		pairCode{"sse2x2", pairSSE2},
		pairCode{"sse2", pairSingle},
		pairCode{"purego", pairGeneric})
}

func setPairImpl(c int) (restore func()) {
	old := pairImpl
	pairImpl = c
	return func() { pairImpl = old }
}
