package cache_test

import (
	"fmt"

	"github.com/nodepass/nodepass/cache"
)

func Example() {
	c, err := cache.New(nil) // matches kept until evicted by count, mismatches 1 min
	if err != nil {
		panic(err)
	}
	stored := "$1:0011223344556677:10:8:1:WK+zTLeAqKDLOUG9SktsJwf2m/PxrV5V7gcXr2wR7JNLtwkoGh3qJig7mhKaL3ZU9GqTxvEYrrf0TGiMR6i07Q"
	k := c.Key("worker-1", stored, "the password the node sent")
	if _, ok := c.Get(k); !ok {
		// ... run scrypt, then record what it said:
		c.Put(k, cache.Match)
	}
	o, ok := c.Get(k)
	fmt.Println(o, ok)
	// Another password, node or stored hash is another key.
	_, ok = c.Get(c.Key("worker-2", stored, "the password the node sent"))
	fmt.Println(ok)
	// Output:
	// match true
	// false
}
