//go:build race

package scrypt

const raceEnabled = true
