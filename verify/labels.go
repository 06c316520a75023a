package verify

import "runtime/pprof"

// Profiler labels: scrypt runs under ProfileLabel=ProfileScrypt, the rest
// of a cache miss under ProfileLabel=ProfileRequest, each merged with the
// labels of the request's context. A cache hit runs unlabelled: a label
// would allocate.
const (
	ProfileLabel   = "nodepass.verify"
	ProfileScrypt  = "scrypt"
	ProfileRequest = "request"
)

var (
	scryptLabels  = pprof.Labels(ProfileLabel, ProfileScrypt)
	requestLabels = pprof.Labels(ProfileLabel, ProfileRequest)
)
