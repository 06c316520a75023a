package verify

// idleBuffers is how many idle scrypt buffers v keeps.
func idleBuffers(v *Verifier) int {
	n, _ := v.pool.Idle()
	return n
}
