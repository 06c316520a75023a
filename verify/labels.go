package verify

import "runtime/pprof"

// Profiler labels. Every scrypt computation runs under the pprof label
// ProfileLabel=ProfileScrypt (its queue wait too, which costs no CPU), and
// the part of a request that misses the cache (queueing, sharing, waiting,
// enrolling) under ProfileLabel=ProfileRequest, each merged with the labels
// of the request's context. A CPU profile of a server therefore splits the
// Verifier's CPU from everything else by label, without naming any of its
// functions. A cache hit runs unlabelled: it allocates nothing, and a label
// would.
const (
	ProfileLabel   = "nodepass.verify"
	ProfileScrypt  = "scrypt"
	ProfileRequest = "request"
)

var (
	scryptLabels  = pprof.Labels(ProfileLabel, ProfileScrypt)
	requestLabels = pprof.Labels(ProfileLabel, ProfileRequest)
)
