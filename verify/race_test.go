//go:build race

package verify

// raceEnabled skips allocation tests: the race detector allocates.
const raceEnabled = true
