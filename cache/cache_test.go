package cache

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func newCache(t *testing.T, o *Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestKeyDistinguishesTuples(t *testing.T) {
	c := newCache(t, nil)
	tuples := [][3]string{
		{"a", "h", "p"},
		{"b", "h", "p"},
		{"a", "h2", "p"},
		{"a", "h", "p2"},
		// Same concatenation, different split: only the length prefixes
		// tell these apart.
		{"ab", "c", ""},
		{"a", "bc", ""},
		{"a", "b", "c"},
		{"", "", "abc"},
		{"abc", "", ""},
	}
	seen := map[Key][3]string{}
	for _, tu := range tuples {
		k := c.Key(tu[0], tu[1], tu[2])
		if prev, ok := seen[k]; ok {
			t.Fatalf("tuples %q and %q share a key", prev, tu)
		}
		seen[k] = tu
		if k != c.Key(tu[0], tu[1], tu[2]) {
			t.Fatalf("key of %q not deterministic", tu)
		}
	}
	// Another cache has another secret: its keys say nothing about these.
	if newCache(t, nil).Key("a", "h", "p") == c.Key("a", "h", "p") {
		t.Fatal("two caches derive the same key: HMAC key not random")
	}
}

func TestGetPut(t *testing.T) {
	c := newCache(t, nil)
	k := c.Key("n", "h", "p")
	if _, ok := c.Get(k); ok {
		t.Fatal("hit in an empty cache")
	}
	c.Put(k, Mismatch)
	if o, ok := c.Get(k); !ok || o != Mismatch {
		t.Fatalf("got %v %v, want mismatch", o, ok)
	}
	c.Put(k, Match) // replaces the mismatch
	if o, ok := c.Get(k); !ok || o != Match {
		t.Fatalf("got %v %v, want match", o, ok)
	}
	if m, mm := lens(c); m != 1 || mm != 0 {
		t.Fatalf("Len %d %d", m, mm)
	}
	c.Put(k, 0) // not an outcome: ignored
	if o, _ := c.Get(k); o != Match {
		t.Fatal("invalid outcome replaced an entry")
	}
}

// lens returns the number of entries of each kind, expired ones included
// until they are read or evicted.
func lens(c *Cache) (matches, mismatches int) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		matches, mismatches = matches+sh.matches.Len(), mismatches+sh.mismatches.Len()
		sh.mu.Unlock()
	}
	return matches, mismatches
}

// pairCount returns the number of pair records.
func pairCount(c *Cache) (n int) {
	for i := range c.pairs {
		ps := &c.pairs[i]
		ps.mu.Lock()
		n += len(ps.m)
		ps.mu.Unlock()
	}
	return n
}

func TestTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, &Options{MatchTTL: time.Hour, MismatchTTL: time.Minute})
		match, mismatch := c.Key("n", "h", "right"), c.Key("n", "h", "wrong")
		c.Put(match, Match)
		c.Put(mismatch, Mismatch)
		time.Sleep(time.Minute - time.Nanosecond)
		if _, ok := c.Get(mismatch); !ok {
			t.Fatal("mismatch expired early")
		}
		time.Sleep(time.Nanosecond)
		if _, ok := c.Get(mismatch); ok {
			t.Fatal("mismatch outlived its TTL")
		}
		if _, ok := c.Get(match); !ok {
			t.Fatal("match expired with the mismatch TTL")
		}
		time.Sleep(time.Hour)
		if _, ok := c.Get(match); ok {
			t.Fatal("match outlived its TTL")
		}
		if m, mm := lens(c); m != 0 || mm != 0 {
			t.Fatalf("expired entries not removed on read: %d %d", m, mm)
		}
	})
}

// TestMatchesDoNotExpireByDefault: without a MatchTTL a match stays until
// it is evicted by count, however long ago it was made.
func TestMatchesDoNotExpireByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, nil)
		match, mismatch := c.Key("n", "h", "right"), c.Key("n", "h", "wrong")
		pair := c.PairKey("n", "h")
		c.PutMatch(pair, match)
		c.Put(mismatch, Mismatch)
		time.Sleep(365 * 24 * time.Hour)
		if o, ok := c.Get(match); !ok || o != Match {
			t.Fatal("a match expired by time without a MatchTTL")
		}
		if got, ok := c.MatchedTuple(pair); !ok || got != match {
			t.Fatal("a pair's verified tuple expired by time without a MatchTTL")
		}
		if _, ok := c.Get(mismatch); ok {
			t.Fatal("a mismatch outlived the default MismatchTTL")
		}
	})
}

// TestMismatchFloodKeepsMatches: wrong passwords fill only their own list.
func TestMismatchFloodKeepsMatches(t *testing.T) {
	c := newCache(t, &Options{MatchSize: 4, MismatchSize: 8})
	for i := range 4 {
		c.Put(c.Key(fmt.Sprint("node-", i), "h", "right"), Match)
	}
	for i := range 1000 {
		c.Put(c.Key("node-0", "h", fmt.Sprint("guess-", i)), Mismatch)
	}
	if m, mm := lens(c); m != 4 || mm != 8 {
		t.Fatalf("Len %d %d, want 4 and 8", m, mm)
	}
	for i := range 4 {
		if o, ok := c.Get(c.Key(fmt.Sprint("node-", i), "h", "right")); !ok || o != Match {
			t.Fatalf("match %d evicted by mismatches", i)
		}
	}
	// The match list is an LRU: a fifth match evicts the least recent.
	c.Get(c.Key("node-0", "h", "right"))
	c.Put(c.Key("node-4", "h", "right"), Match)
	if _, ok := c.Get(c.Key("node-1", "h", "right")); ok {
		t.Fatal("least recently used match not evicted")
	}
	if _, ok := c.Get(c.Key("node-0", "h", "right")); !ok {
		t.Fatal("recently used match evicted")
	}
}

// TestPairKeptByItsTupleGets: reading a pair's verified tuple keeps the
// pair's record as recently used as the tuple, so that the password in
// constant use (a cluster's join token) keeps "any other is a mismatch"
// while MatchSize other pairs are verified.
func TestPairKeptByItsTupleGets(t *testing.T) {
	c := newCache(t, &Options{MatchSize: 4})
	pair, tuple := c.PairKey("token", "h"), c.Key("token", "h", "right")
	c.PutMatch(pair, tuple)
	for i := range 40 {
		c.PutMatch(c.PairKey(fmt.Sprint("node-", i), "h"), c.Key(fmt.Sprint("node-", i), "h", "pw"))
		if o, ok := c.Get(tuple); !ok || o != Match {
			t.Fatalf("after %d other pairs: the tuple in use evicted", i+1)
		}
	}
	if got, ok := c.MatchedTuple(pair); !ok || got != tuple {
		t.Fatal("the pair of the tuple in use evicted by other pairs")
	}
	// A pair whose tuple is not read goes, least recently used first.
	if _, ok := c.MatchedTuple(c.PairKey("node-0", "h")); ok {
		t.Fatal("a pair not used for 39 others kept")
	}
}

// TestNewValidates: negative options are refused, and sizes as large as
// an int holds are taken (each shard's share rounded up without
// overflow).
func TestNewValidates(t *testing.T) {
	for _, o := range []Options{{MatchSize: -1}, {MismatchSize: -1}, {MatchTTL: -1}, {MismatchTTL: -time.Second}} {
		if _, err := New(&o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	c, err := New(&Options{MatchSize: math.MaxInt, MismatchSize: math.MaxInt})
	if err != nil {
		t.Fatalf("sizes of math.MaxInt: %v", err)
	}
	k := c.Key("n", "hash", "pw")
	c.Put(k, Match)
	if o, ok := c.Get(k); o != Match || !ok {
		t.Fatalf("Get after Put = %v, %v", o, ok)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := newCache(t, &Options{MatchSize: 64, MismatchSize: 64})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := c.Key(fmt.Sprint("n", i%100), "h", fmt.Sprint(g%2))
				o := Outcome(g%2 + 1)
				c.Put(k, o)
				if got, ok := c.Get(k); ok && got != o {
					t.Errorf("tuple with outcome %v read back as %v", o, got)
				}
			}
		})
	}
	wg.Wait()
}

func TestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := newCache(t, nil)
	hash := "$1:0001020304050607:15:8:1:kg9Jrz3bATlkXiCqL7d8SkSTs/2HeiPYnoI/BbhQCduby3WCOic74e71wmS0W2Hwv33if/xVbwSOfHTMwZY5Xg"
	k := c.Key("node-1", hash, "0123456789abcdef0123456789abcdef")
	c.Put(k, Match)
	if n := testing.AllocsPerRun(1000, func() {
		if _, ok := c.Get(c.Key("node-1", hash, "0123456789abcdef0123456789abcdef")); !ok {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Fatalf("Key+Get allocates %v times", n)
	}
}

func TestOutcomeString(t *testing.T) {
	if Match.String() != "match" || Mismatch.String() != "mismatch" || Outcome(9).String() != "Outcome(9)" {
		t.Fatal("Outcome.String")
	}
}

// TestPairLastsWithItsTuple: a pair's record of its verified tuple lasts
// exactly as long as the tuple's match: it goes when the match is
// evicted, expires or is replaced by a mismatch, and a pair that now
// names another tuple keeps its record when the old tuple goes. So the
// records never outnumber MatchSize.
func TestPairLastsWithItsTuple(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCache(t, &Options{MatchSize: 4, MatchTTL: time.Hour})
		pair := func(i int) Key { return c.PairKey(fmt.Sprint("node-", i), "h") }
		tuple := func(i int, pw string) Key { return c.Key(fmt.Sprint("node-", i), "h", pw) }
		for i := range 40 {
			c.PutMatch(pair(i), tuple(i, "pw"))
		}
		if n := pairCount(c); n != 4 {
			t.Fatalf("%d pair records for MatchSize 4", n)
		}
		if _, ok := c.MatchedTuple(pair(35)); ok {
			t.Fatal("the pair of an evicted match kept")
		}
		c.Put(tuple(39, "pw"), Mismatch)
		if _, ok := c.MatchedTuple(pair(39)); ok {
			t.Fatal("the pair of a tuple now a mismatch kept")
		}
		c.PutMatch(pair(38), tuple(38, "new"))
		c.Put(tuple(38, "pw"), Mismatch)
		if got, ok := c.MatchedTuple(pair(38)); !ok || got != tuple(38, "new") {
			t.Fatal("the pair's new tuple lost when its old one went")
		}
		c.Put(tuple(38, "new"), Match) // a plain Put keeps it the pair's
		time.Sleep(time.Hour)
		if _, ok := c.MatchedTuple(pair(38)); ok {
			t.Fatal("the pair of an expired match kept")
		}
		if n := pairCount(c); n != 2 {
			t.Fatalf("%d pair records left, want 2 (node-36's and node-37's: expiry is checked on read)", n)
		}
	})
}

// TestShards: a cache of the default sizes is split into maxShards
// shards, one too small to keep minShardEntries of each kind in two
// shards stays whole (its LRU order exact), and the sizes in between
// halve the count.
func TestShards(t *testing.T) {
	for _, c := range []struct {
		match, mismatch, want int
	}{
		{DefaultMatchSize, DefaultMismatchSize, maxShards},
		{4, 4, 1},
		{127, 16384, 1},
		{128, 128, 2},
		{1000, 16384, 8},
		{1024, 16384, maxShards},
		{16384, 100, 1},
		{1 << 20, 1 << 20, maxShards},
	} {
		ca := newCache(t, &Options{MatchSize: c.match, MismatchSize: c.mismatch})
		if got := len(ca.shards); got != c.want || len(ca.pairs) != c.want {
			t.Errorf("sizes %d and %d: %d shards (%d of pairs), want %d", c.match, c.mismatch, got, len(ca.pairs), c.want)
		}
	}
}

// TestShardedBounds: split in shards, the cache keeps at most MatchSize
// matches and MismatchSize mismatches (each shard its share), keeps the
// most recent of them, and keeps a pair's record exactly as long as its
// tuple's match, whichever shards the pair and its tuple fall in.
func TestShardedBounds(t *testing.T) {
	const size, n = 2048, 20000
	c := newCache(t, &Options{MatchSize: size, MismatchSize: size})
	if len(c.shards) != maxShards {
		t.Fatalf("%d shards, want %d", len(c.shards), maxShards)
	}
	pair := func(i int) Key { return c.PairKey(fmt.Sprint("node-", i), "h") }
	tuple := func(i int) Key { return c.Key(fmt.Sprint("node-", i), "h", "pw") }
	for i := range n {
		c.PutMatch(pair(i), tuple(i))
		c.Put(c.Key(fmt.Sprint("node-", i), "h", "wrong"), Mismatch)
	}
	matches, mismatches := lens(c)
	if matches > size || mismatches > size || matches < size*3/4 {
		t.Fatalf("%d matches and %d mismatches kept, for sizes of %d", matches, mismatches, size)
	}
	if p := pairCount(c); p != matches {
		t.Fatalf("%d pair records for %d matches", p, matches)
	}
	for i := n - 100; i < n; i++ { // the most recent: far fewer than a shard holds
		if o, ok := c.Get(tuple(i)); !ok || o != Match {
			t.Fatalf("node-%d's match, among the last put, is gone", i)
		}
	}
	kept := 0
	for i := range n {
		_, match := c.Get(tuple(i))
		got, paired := c.MatchedTuple(pair(i))
		if paired != match || paired && got != tuple(i) {
			t.Fatalf("node-%d: match kept %v, pair record kept %v", i, match, paired)
		}
		if match {
			kept++
		}
	}
	if kept != matches {
		t.Fatalf("%d matches read, %d counted", kept, matches)
	}
}

// TestShardedConcurrent: gets, puts and pair lookups from many
// goroutines at once, on a sharded cache small enough to evict all the
// time, end (no lock taken in two orders) and agree (run it with -race).
func TestShardedConcurrent(t *testing.T) {
	c := newCache(t, &Options{MatchSize: 1024, MismatchSize: 1024})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 3000 {
				node := fmt.Sprint("node-", (g*7919+i)%5000)
				pair, tuple := c.PairKey(node, "h"), c.Key(node, "h", "pw")
				switch i % 4 {
				case 0:
					c.PutMatch(pair, tuple)
				case 1:
					c.Put(c.Key(node, "h", "wrong"), Mismatch)
				case 2:
					if got, ok := c.MatchedTuple(pair); ok && got != tuple {
						t.Errorf("%s: the pair's record names another tuple", node)
					}
				default:
					c.Get(tuple)
				}
			}
		})
	}
	wg.Wait()
	if matches, _ := lens(c); pairCount(c) > matches {
		t.Fatalf("%d pair records for %d matches", pairCount(c), matches)
	}
}
