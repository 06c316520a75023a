//go:build !amd64 || purego || !gc

package scrypt

func pairImpls() []pairCode { return []pairCode{{"purego", 0}} }

func setPairImpl(int) (restore func()) { return func() {} }
