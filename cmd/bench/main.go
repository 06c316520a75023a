// Command bench will run the herd benchmark. It is not built yet.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "bench: the herd benchmark is not built yet; run `make test` for the test suite")
	os.Exit(1)
}
