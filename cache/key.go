package cache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"sync"
)

// Key identifies one (node, stored hash, password) tuple. It is
// HMAC-SHA256, under a key drawn at random when the Cache is made, over the
// three fields each prefixed with its length, so no two different tuples
// share a Key and no password can be read back or tested from a Key
// without the process's secret.
type Key [sha256.Size]byte

// keyer computes Keys. It is safe for concurrent use and allocates nothing
// in the steady state: HMAC states and scratch buffers come from a pool,
// and scratch buffers are cleared before they go back.
type keyer struct {
	pool sync.Pool // of *keyState
}

type keyState struct {
	mac hash.Hash
	buf []byte
}

func newKeyer() (*keyer, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("cache: reading random HMAC key: %w", err)
	}
	k := &keyer{}
	k.pool.New = func() any {
		return &keyState{mac: hmac.New(sha256.New, secret), buf: make([]byte, 0, 512)}
	}
	return k, nil
}

// Key domains: a tuple key and a pair key never share an HMAC input.
const (
	domainTuple byte = 't'
	domainPair  byte = 'p'
)

// key returns HMAC(secret, domain len(a) a len(b) b len(c) c), lengths as
// 8-byte big-endian integers.
func (k *keyer) key(domain byte, a, b, c string) Key {
	s := k.pool.Get().(*keyState)
	buf := append(s.buf[:0], domain)
	for _, f := range [...]string{a, b, c} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(f)))
		buf = append(buf, f...)
	}
	s.mac.Reset()
	s.mac.Write(buf)
	clear(buf) // the password must not outlive the call in a pooled buffer
	var out Key
	sum := s.mac.Sum(buf[:0])
	copy(out[:], sum)
	clear(sum)
	s.buf = buf[:0]
	k.pool.Put(s)
	return out
}
