//go:build !unix

package main

// lockDataDir does nothing where there is no flock(2): a -data-dir
// shared with a -store memory server is not detected there.
func lockDataDir(string, bool) (func(), error) { return func() {}, nil }
