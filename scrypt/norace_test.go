//go:build !race

package scrypt

const raceEnabled = false
