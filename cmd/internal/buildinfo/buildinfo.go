// Package buildinfo gives the commands of this module their -version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Version is the module version the binary was built at ("(devel)" from
// a clone) and the Go version that built it.
func Version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version + " " + runtime.Version()
	}
	return "(devel) " + runtime.Version()
}
