package scrypt

import (
	"bytes"
	"testing"
)

// FuzzKey compares Key and KeyBatch with x/crypto on fuzzed passwords,
// salts and parameters: logN 1-16, r 1-16, p 1-4 and keyLen 1-128, with N
// lowered until the cost 128·r·N·p is at most 1 MiB so that an input takes
// milliseconds. Every input runs Key, then a KeyBatch of the job and a
// second job with the same N and r (so that they share a code path for
// several hashes), a third with another N, and one with invalid
// parameters, then a KeyBatch of the job and siblings that fill the
// widest kernel's lanes (Lanes() blocks of the same N and r). The seed
// corpus is in testdata/fuzz/FuzzKey.
func FuzzKey(f *testing.F) {
	f.Add([]byte("password"), []byte("NaCl"), uint8(10), uint8(8), uint8(2), uint8(64))
	f.Add([]byte{}, []byte{}, uint8(4), uint8(1), uint8(1), uint8(64))
	f.Fuzz(func(t *testing.T, password, salt []byte, logN, r, p, keyLen uint8) {
		c := params{
			password: password, salt: salt,
			logN: 1 + int(logN)%16, r: 1 + int(r)%16, p: 1 + int(p)%4,
			keyLen: 1 + int(keyLen)%128,
		}
		for c.logN > 1 && 128*c.r*c.p<<c.logN > 1<<20 {
			c.logN--
		}
		want := xKey(t, c)
		got, err := Key(c.password, c.salt, 1<<c.logN, c.r, c.p, c.keyLen)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%v: Key = %x, %v; x/crypto %x", c, got, err, want)
		}
		sibling := c
		sibling.password = append([]byte("sibling"), c.password...)
		other := c
		other.logN = 1 + c.logN%4
		jobs := []Job{c.job(), sibling.job(), {N: 1<<c.logN + 1, R: c.r, P: c.p, KeyLen: 8}, other.job()}
		KeyBatch(jobs)
		for i, c := range []params{c, sibling, {}, other} {
			if i == 2 {
				if jobs[i].Err == nil {
					t.Fatalf("%v: the invalid job has no error", c)
				}
				continue
			}
			if want := xKey(t, c); jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want) {
				t.Fatalf("KeyBatch job %d, %v: %x, %v; x/crypto %x", i, c, jobs[i].Key, jobs[i].Err, want)
			}
		}
		full := []params{c}
		for blocks := c.p; blocks < Lanes(); blocks++ {
			s := c
			s.password = append([]byte{byte(blocks)}, c.password...)
			s.p = 1
			full = append(full, s)
		}
		jobs = jobs[:0]
		for _, c := range full {
			jobs = append(jobs, c.job())
		}
		KeyBatch(jobs)
		for i, c := range full {
			if want := xKey(t, c); jobs[i].Err != nil || !bytes.Equal(jobs[i].Key, want) {
				t.Fatalf("full KeyBatch job %d, %v: %x, %v; x/crypto %x", i, c, jobs[i].Key, jobs[i].Err, want)
			}
		}
	})
}
