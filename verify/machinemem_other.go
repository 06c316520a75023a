//go:build !linux

package verify

// machineMemory returns what bounds the memory of this process, for the
// default scrypt budget (defaultScryptMemory): nothing known here.
func machineMemory() (cgroup, physical int64) { return 0, 0 }
