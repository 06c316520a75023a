//go:build race

package cache

// raceEnabled skips allocation tests: the race detector allocates.
const raceEnabled = true
