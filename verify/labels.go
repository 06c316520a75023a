package verify

import "runtime/pprof"

// Profiler labels: scrypt runs under ProfileLabel=ProfileScrypt, the rest
// of a cache miss under ProfileLabel=ProfileRequest, each merged with the
// labels of the request's context. A cache hit runs unlabelled: a label
// would allocate. One batch computes several requests' scrypt on one
// goroutine, so its CPU carries only the labels all of its jobs share
// with one value: a label that differs between them (a node's name, say)
// is not in the profile for that batch. The Observer, told of each job
// with the job's own context, still attributes every computation.
const (
	ProfileLabel   = "nodepass.verify"
	ProfileScrypt  = "scrypt"
	ProfileRequest = "request"
)

var (
	scryptLabels  = pprof.Labels(ProfileLabel, ProfileScrypt)
	requestLabels = pprof.Labels(ProfileLabel, ProfileRequest)
)
