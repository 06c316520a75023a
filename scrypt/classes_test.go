package scrypt

import "testing"

// TestChooserTableNotCapturedByFirstClasses: maxClasses classes seen once
// each (hashes planted with distinct N and r, say) do not keep a class
// that comes after them, and carries the work, from being measured: it
// is chosen for, appears in Choices, and stays there while the planted
// classes come back.
func TestChooserTableNotCapturedByFirstClasses(t *testing.T) {
	resetChoices(t)
	for i := range maxClasses {
		choiceFor(class{N: 1 << (1 + i/8), r: 1 + i%8, n: 1})
	}
	const N, r = 1 << 10, 8
	herd := func() {
		for range 4 {
			if _, err := Key([]byte("pw"), []byte("salt"), N, r, 1, 32); err != nil {
				t.Fatal(err)
			}
		}
	}
	inChoices := func() bool {
		cs := Choices()
		if len(cs) > maxClasses {
			t.Fatalf("%d classes kept, want at most %d", len(cs), maxClasses)
		}
		for _, c := range cs {
			if c.N == N && c.R == r {
				return true
			}
		}
		return false
	}
	herd()
	if !inChoices() {
		t.Fatal("the herd's class, first seen after a full table, is missing from Choices")
	}
	for i := range maxClasses {
		choiceFor(class{N: 1 << (1 + i/8), r: 1 + i%8, n: 1})
	}
	herd()
	if !inChoices() {
		t.Fatal("the herd's class was evicted by classes used less")
	}
}
