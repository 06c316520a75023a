package verify

import "runtime/pprof"

// Profiler labels: scrypt runs under ProfileLabel=ProfileScrypt, the rest
// of a cache miss under ProfileRequest.
const (
	ProfileLabel   = "nodepass.verify"
	ProfileScrypt  = "scrypt"
	ProfileRequest = "request"
)

var (
	scryptLabels  = pprof.Labels(ProfileLabel, ProfileScrypt)
	requestLabels = pprof.Labels(ProfileLabel, ProfileRequest)
)
