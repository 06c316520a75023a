//go:build !unix

package scrypt

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
