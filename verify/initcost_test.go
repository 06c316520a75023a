package verify

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/nodepass/nodepass/scrypt"
)

// The child process of TestNewHasherInInit: this test binary, started
// with idleChild set to "hasher", makes a Hasher with the defaults in an
// init function, as ADOPTING.md has k3s do; set to "none", it makes
// none. Either idles for idleFor, prints what the process computed,
// mapped and runs, and exits.
const (
	idleChild = "NODEPASS_VERIFY_IDLE_CHILD"
	idleFor   = time.Second
)

var initHasher *Hasher

func init() {
	if os.Getenv(idleChild) == "hasher" {
		h, err := NewHasher(nil)
		if err != nil {
			panic(err)
		}
		initHasher = h
	}
}

// idleChildMain is TestMain in the child.
func idleChildMain() {
	time.Sleep(idleFor)
	var runs uint64
	if initHasher != nil {
		runs = initHasher.Stats().ScryptRuns
	}
	fmt.Printf("classes=%d mapped=%d goroutines=%d runs=%d\n",
		len(scrypt.Choices()), scrypt.OffHeapBytes(), runtime.NumGoroutine(), runs)
	os.Exit(0)
}
