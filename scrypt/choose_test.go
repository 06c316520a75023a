package scrypt

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"
)

// resetChoices forgets every choice made, for a test to start afresh,
// and restores them when it ends.
func resetChoices(t *testing.T) {
	choices.mu.Lock()
	old := choices.classes
	oldOrder := choices.order
	choices.classes, choices.order = nil, nil
	choices.mu.Unlock()
	t.Cleanup(func() {
		choices.mu.Lock()
		choices.classes, choices.order = old, oldOrder
		choices.mu.Unlock()
	})
}

// TestChooser drives one class's choice with made-up segment times: every
// kernel that fits is tried (pure Go among them), the fastest is
// chosen whatever its order of preference, a kernel far slower than the
// leader stops being tried, and a zero time (a fake clock) counts for
// nothing.
func TestChooser(t *testing.T) {
	for _, n := range []int{1, lanes} {
		resetChoices(t)
		ch := choiceFor(class{N: 1 << 12, r: 8, n: n})
		if len(ch.cands) == 0 || ch.cands[len(ch.cands)-1] != kernelGeneric {
			t.Fatalf("n=%d: candidates %v, want pure Go last among them", n, ch.cands)
		}
		// The last candidate in order of preference is the fastest, the
		// first one 1.2x slower (kept until the end), and the others 3x.
		fastest := ch.cands[len(ch.cands)-1]
		cost := func(k kernel) time.Duration {
			switch k {
			case fastest:
				return 100 * time.Microsecond
			case ch.cands[0]:
				return 120 * time.Microsecond
			}
			return 300 * time.Microsecond
		}
		tried := map[kernel]int{}
		for steps := 0; ch.chosen.Load() == 0; steps++ {
			if steps > 100 {
				t.Fatalf("n=%d: no choice after 100 segments (tried %v)", n, tried)
			}
			k, timed := ch.segment()
			if !timed {
				t.Fatalf("n=%d: an undecided choice gave an untimed segment", n)
			}
			tried[k]++
			ch.record(k, 0, 0) // nothing
			ch.record(k, 100, 0)
			ch.record(k, 100, cost(k))
		}
		if got, _ := ch.segment(); got != fastest || ch.best() != fastest {
			t.Errorf("n=%d: chose %v, want %v", n, got, fastest)
		}
		for _, k := range ch.cands {
			want := segmentsPerKernel
			if cost(k) > 2*cost(fastest) {
				want = 2 // dropped once measured twice
			}
			if tried[k] != want {
				t.Errorf("n=%d: %v tried %d times, want %d", n, k, tried[k], want)
			}
		}
		cs := Choices()
		if len(cs) != 1 || cs[0].Kernel != fastest.String() || cs[0].Hashes != n || cs[0].PerHash[fastest.String()] <= 0 {
			t.Errorf("n=%d: Choices() = %+v", n, cs)
		}
	}
}

// TestChooserUnderLoad: segments disturbed by load (a preemption, TLS on
// the same core) only ever take longer; the kernel fastest when
// undisturbed is chosen though three of its five segments were slowed
// twentyfold, as in a server that starts in a herd.
func TestChooserUnderLoad(t *testing.T) {
	resetChoices(t)
	ch := choiceFor(class{N: 1 << 12, r: 8, n: lanes})
	if len(ch.cands) < 2 {
		t.Skipf("one candidate (%v): nothing to choose", ch.cands)
	}
	fastest, steady := ch.cands[0], ch.cands[len(ch.cands)-1]
	seen := map[kernel]int{}
	for steps := 0; ch.chosen.Load() == 0; steps++ {
		if steps > 100 {
			t.Fatal("no choice after 100 segments")
		}
		k, _ := ch.segment()
		d := 300 * time.Microsecond
		switch k {
		case fastest:
			d = 100 * time.Microsecond
			if n := seen[k]; n >= 1 && n <= 3 {
				d *= 20
			}
		case steady:
			d = 140 * time.Microsecond
		}
		seen[k]++
		ch.record(k, 100, d)
	}
	if got := ch.best(); got != fastest {
		t.Errorf("chose %v, want %v (fastest undisturbed); segments %v", got, fastest, seen)
	}
	if cs := Choices(); cs[0].PerHash[fastest.String()] != time.Duration(float64(100*time.Microsecond)/float64(100*lanes)*float64(1<<12)) {
		t.Errorf("PerHash %v: want the fastest segment's time", cs[0].PerHash)
	}
}

// TestChooserBounded: past maxClasses, a new class is measured and takes
// the place of the class least used, the oldest of those.
func TestChooserBounded(t *testing.T) {
	resetChoices(t)
	for i := range maxClasses {
		choiceFor(class{N: 16, r: i + 1, n: 1})
	}
	choiceFor(class{N: 16, r: 1, n: 1}) // r=1 used twice: r=2 is the oldest of the least used
	ch := choiceFor(class{N: 16, r: maxClasses + 1, n: 1})
	if _, timed := ch.segment(); !timed {
		t.Error("class past the bound: not measured")
	}
	cs := Choices()
	if len(cs) != maxClasses {
		t.Errorf("%d classes reported, want %d", len(cs), maxClasses)
	}
	for _, c := range cs {
		if c.R == 2 {
			t.Error("the oldest class of the least used was kept")
		}
	}
	if cs[0].R != 1 || cs[len(cs)-1].R != maxClasses+1 {
		t.Errorf("classes %d..%d, want 1 (used most) first and the new one last", cs[0].R, cs[len(cs)-1].R)
	}
}

// TestChooserSwitchesKernels computes keys while their class is being
// measured, so that one hash runs its segments on different kernels, and
// compares them with x/crypto: switching kernels between BlockMix calls
// must not change a byte.
func TestChooserSwitchesKernels(t *testing.T) {
	resetChoices(t)
	rng := rand.New(rand.NewPCG(16, 5))
	c := params{logN: 12, r: 8, p: 1, keyLen: 64}
	if raceEnabled {
		c.logN = 10
	}
	for round := 0; round < 3; round++ {
		jobs := make([]Job, lanes)
		want := make([][]byte, lanes)
		for i := range jobs {
			c.password, c.salt = randBytes(rng, 16), randBytes(rng, 8)
			jobs[i], want[i] = c.job(), xKey(t, c)
		}
		KeyBatch(jobs)
		for i := range jobs {
			if jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want[i]) {
				t.Fatalf("round %d, job %d: %x, %v; x/crypto %x", round, i, jobs[i].Key, jobs[i].Err, want[i])
			}
		}
	}
	ch := choiceFor(class{N: 1 << c.logN, r: c.r, n: lanes})
	ch.mu.Lock()
	defer ch.mu.Unlock()
	measured := 0
	for _, k := range ch.cands {
		if ch.segments[k] > 0 {
			measured++
		}
	}
	if len(ch.cands) > 1 && measured < 2 {
		t.Errorf("%d of %d kernels measured: the hashes did not switch kernels", measured, len(ch.cands))
	}
}
