// Package cache keeps the outcomes of node-password verifications so that a
// node's retries, and other requests carrying the same tuple, do not cost
// another scrypt computation.
//
// An entry answers only the exact (node, stored hash, password) tuple that
// produced it: its Key is an HMAC over the three fields under a per-process
// random key, so a changed stored hash, another node or another password
// never reads it, and no password is held in memory. Matches and mismatches
// live in separate bounded LRU lists with separate TTLs, so a flood of wrong
// passwords can evict only other mismatches. Expiry is checked on read; the
// cache starts no goroutines.
//
// Matches do not expire with time by default, only by count (least
// recently used first). That is safe because a match is a pure function
// of its tuple: the stored hash is part of the Key, so a node whose secret
// is rewritten asks under a new Key, and a deleted node has no stored
// hash to ask under. Mismatches keep a short TTL: a wrong password costs
// one scrypt per MismatchTTL, however often it is retried.
//
// Beyond Key, Get and Put, a Cache keeps per (node, stored hash) pair
// the one tuple known to match ([Cache.PutMatch], [Cache.MatchedTuple])
// while that tuple's match is kept: with a long enough stored key no
// second password can match, so any other is a mismatch without scrypt.
package cache

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
)

// matchEntry is a match, and the pair it is the verified tuple of
// (PutMatch), if any.
type matchEntry struct {
	expires time.Duration // since epoch; never without a MatchTTL
	pair    Key
	paired  bool
}

// Outcome is a cached verification result.
type Outcome uint8

const (
	// Match: the password matched the stored hash.
	Match Outcome = iota + 1
	// Mismatch: the password did not match the stored hash.
	Mismatch
)

func (o Outcome) String() string {
	switch o {
	case Match:
		return "match"
	case Mismatch:
		return "mismatch"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Defaults for Options fields left zero.
const (
	DefaultMatchSize    = 16384
	DefaultMismatchSize = 4096
	DefaultMismatchTTL  = time.Minute
)

// Options configure a Cache. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// MatchSize is the most matches kept; the least recently used goes
	// first. Default DefaultMatchSize (16384). A large cache is split by
	// key into up to 16 shards, each with its share (rounded up) and a
	// lock of its own: the entry evicted is the least recently used of
	// its shard.
	MatchSize int
	// MismatchSize is the most mismatches kept. Default
	// DefaultMismatchSize (4096).
	MismatchSize int
	// MatchTTL, if positive, is how long a match is trusted. Zero (the
	// default): bounded by MatchSize only (see the package doc).
	MatchTTL time.Duration
	// MismatchTTL is how long a mismatch is remembered. Default 1 min.
	MismatchTTL time.Duration
}

// Cache is a bounded cache of verification outcomes. It is safe for
// concurrent use. The zero value is not usable; use New.
type Cache struct {
	keys        *keyer
	epoch       time.Time // expiries are monotonic offsets from it
	matchTTL    time.Duration
	mismatchTTL time.Duration

	// shards hold the outcomes, a Key's in shards[shardOf(k)];
	// pairs map a pair's key to its verified tuple while the tuple's
	// match is kept (unpair drops it when the match goes), a pair's in
	// pairs[shardOf(pair)]. A goroutine holding a shard's lock may take
	// a pairShard's, never the other way round.
	shards []shard
	pairs  []pairShard
}

// A shard is the matches and mismatches of the Keys that fall in it.
type shard struct {
	mu         sync.Mutex
	matches    *lru.LRU[Key, matchEntry]
	mismatches *lru.LRU[Key, time.Duration] // value: expiry, since epoch
	_          [64]byte                     // its lock apart from the next shard's cache line
}

// A pairShard is the verified tuples of the pairs that fall in it.
type pairShard struct {
	mu sync.Mutex
	m  map[Key]Key
	_  [64]byte
}

// Sharding: a Cache has the most shards, a power of two up to
// maxShards, that keeps minShardEntries matches and mismatches per
// shard. Keys are HMAC outputs, so their first byte spreads them evenly.
const (
	maxShards       = 16
	minShardEntries = 64
)

// shardCount is how many shards a Cache of these sizes has.
func shardCount(matchSize, mismatchSize int) int {
	n := 1
	for n < maxShards && min(matchSize, mismatchSize)/(2*n) >= minShardEntries {
		n *= 2
	}
	return n
}

// shardOf is the index of k's shard among n, a power of two.
func shardOf(k Key, n int) int { return int(k[0]) & (n - 1) }

// shard is k's shard.
func (c *Cache) shard(k Key) *shard { return &c.shards[shardOf(k, len(c.shards))] }

// pairShard is the pairShard of pair.
func (c *Cache) pairShard(pair Key) *pairShard { return &c.pairs[shardOf(pair, len(c.pairs))] }

// New returns an empty Cache with a fresh random HMAC key. It fails on
// negative options or when the system's random source fails.
func New(opts *Options) (*Cache, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MatchSize < 0 || o.MismatchSize < 0 {
		return nil, errors.New("cache: negative size")
	}
	if o.MatchTTL < 0 || o.MismatchTTL < 0 {
		return nil, errors.New("cache: negative TTL")
	}
	o.MatchSize = cmp.Or(o.MatchSize, DefaultMatchSize)
	o.MismatchSize = cmp.Or(o.MismatchSize, DefaultMismatchSize)
	o.MismatchTTL = cmp.Or(o.MismatchTTL, DefaultMismatchTTL)
	keys, err := newKeyer()
	if err != nil {
		return nil, err
	}
	n := shardCount(o.MatchSize, o.MismatchSize)
	c := &Cache{keys: keys, epoch: time.Now(), matchTTL: o.MatchTTL, mismatchTTL: o.MismatchTTL,
		shards: make([]shard, n), pairs: make([]pairShard, n)}
	for i := range n {
		// Each shard's share, rounded up, is positive: NewLRU's only error
		// cannot happen.
		c.shards[i].matches, _ = lru.NewLRU((o.MatchSize-1)/n+1, c.unpair)
		c.shards[i].mismatches, _ = lru.NewLRU[Key, time.Duration]((o.MismatchSize-1)/n+1, nil)
		c.pairs[i].m = make(map[Key]Key)
	}
	return c, nil
}

// never is the expiry of an entry without a TTL.
const never = time.Duration(math.MaxInt64)

// matchExpiry is when a match put now expires.
func (c *Cache) matchExpiry() time.Duration {
	if c.matchTTL <= 0 {
		return never
	}
	return c.now() + c.matchTTL
}

// Key returns the Key of the tuple (node, stored hash, password). It
// allocates nothing and keeps no copy of its arguments.
func (c *Cache) Key(node, hash, password string) Key {
	return c.keys.key(domainTuple, node, hash, password)
}

// PairKey returns the key of the pair (node, stored hash), under which
// PutMatch records which tuple matched. It is never equal to a tuple Key.
func (c *Cache) PairKey(node, hash string) Key {
	return c.keys.key(domainPair, node, hash, "")
}

// Get returns the outcome cached under k, if any and not expired. An
// expired entry is removed. Reading a pair's verified tuple (PutMatch)
// keeps the pair's record, which lasts as long as the tuple's match. Get
// allocates nothing.
func (c *Cache) Get(k Key) (Outcome, bool) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.matches.Get(k); ok {
		if e.expires == never || c.now() < e.expires {
			return Match, true
		}
		sh.matches.Remove(k)
	}
	if exp, ok := sh.mismatches.Get(k); ok {
		if c.now() < exp {
			return Mismatch, true
		}
		sh.mismatches.Remove(k)
	}
	return 0, false
}

// now is the time since the Cache's epoch, which expiries count from.
func (c *Cache) now() time.Duration { return time.Since(c.epoch) }

// Put records outcome o under k with the TTL of its kind, replacing any
// entry of the other kind. Outcomes other than Match and Mismatch are
// ignored: errors are never cached.
func (c *Cache) Put(k Key, o Outcome) {
	sh := c.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch o {
	case Match:
		sh.mismatches.Remove(k)
		e, _ := sh.matches.Peek(k) // a pair's verified tuple stays one
		e.expires = c.matchExpiry()
		sh.matches.Add(k, e)
	case Mismatch:
		sh.matches.Remove(k)
		sh.mismatches.Add(k, c.now()+c.mismatchTTL)
	}
}

// PutMatch records that tuple, the Key of (node, stored hash, password),
// matched, and that it is the pair's (node, stored hash) verified password:
// see MatchedTuple. It also does Put(tuple, Match).
func (c *Cache) PutMatch(pair, tuple Key) {
	sh := c.shard(tuple)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.mismatches.Remove(tuple)
	sh.matches.Add(tuple, matchEntry{expires: c.matchExpiry(), pair: pair, paired: true})
	ps := c.pairShard(pair)
	ps.mu.Lock()
	ps.m[pair] = tuple
	ps.mu.Unlock()
}

// unpair forgets the pair whose verified tuple's match k leaves the
// cache: evicted, expired or replaced by a mismatch. It is the matches'
// eviction callback, called with k's shard locked.
func (c *Cache) unpair(k Key, e matchEntry) {
	if !e.paired {
		return
	}
	ps := c.pairShard(e.pair)
	ps.mu.Lock()
	if ps.m[e.pair] == k {
		delete(ps.m, e.pair)
	}
	ps.mu.Unlock()
}

// MatchedTuple returns the tuple Key recorded by PutMatch for pair while
// that tuple's match is kept, and keeps it as recently used. A caller
// holding another tuple Key for the same pair knows that tuple's
// password differs from the verified one.
func (c *Cache) MatchedTuple(pair Key) (Key, bool) {
	ps := c.pairShard(pair)
	ps.mu.Lock()
	tuple, ok := ps.m[pair]
	ps.mu.Unlock()
	if !ok {
		return Key{}, false
	}
	// The tuple's match may have gone since: then the pair's record has
	// gone with it, and Get finds nothing.
	sh := c.shard(tuple)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, ok := sh.matches.Get(tuple)
	if !ok || !e.paired || e.pair != pair {
		return Key{}, false
	}
	if e.expires != never && c.now() >= e.expires {
		sh.matches.Remove(tuple)
		return Key{}, false
	}
	return tuple, true
}
