package sched

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTree compares the tree with a sorted slice under random inserts
// and removals.
func TestTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tr tree[int]
	type entry struct {
		k treeKey
		w int64
	}
	var model []entry
	find := func(k treeKey) int {
		return slices.IndexFunc(model, func(e entry) bool { return e.k == k })
	}
	for step := range 20000 {
		k := treeKey{uint64(rng.IntN(4)), uint64(rng.IntN(500))}
		if i := find(k); i >= 0 {
			tr.remove(k)
			model = slices.Delete(model, i, i+1)
		} else {
			w := int64(rng.IntN(1000))
			tr.insert(k, int(k.lo), w)
			model = append(model, entry{k, w})
			slices.SortFunc(model, func(a, b entry) int {
				if a.k.less(b.k) {
					return -1
				}
				return 1
			})
		}
		if step%97 != 0 {
			continue
		}
		n, w := tr.len()
		var mw int64
		for _, e := range model {
			mw += e.w
		}
		if n != len(model) || w != mw {
			t.Fatalf("step %d: len %d, %d; want %d, %d", step, n, w, len(model), mw)
		}
		probe := treeKey{uint64(rng.IntN(4)), uint64(rng.IntN(500))}
		var pc int
		var pw int64
		for _, e := range model {
			if e.k.less(probe) {
				pc++
				pw += e.w
			}
		}
		if c, w := tr.before(probe); c != pc || w != pw {
			t.Fatalf("step %d: before(%v) = %d, %d; want %d, %d", step, probe, c, w, pc, pw)
		}
		if f, ok := tr.first(); len(model) > 0 && (!ok || f != int(model[0].k.lo)) {
			t.Fatalf("step %d: first %v, want %v", step, f, model[0].k.lo)
		}
		if l, ok := tr.last(); len(model) > 0 && (!ok || l != int(model[len(model)-1].k.lo)) {
			t.Fatalf("step %d: last %v", step, l)
		}
	}
}
