package kube

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults for Options fields left zero.
const (
	// DefaultProgram is the distribution whose secrets a Store reads.
	DefaultProgram = "k3s"
	// DefaultNamespace is where k3s and RKE2 keep node-password secrets.
	DefaultNamespace = "kube-system"
	// DefaultReadAfterCreate is how long a Store double-checks a name it
	// has just created, or been told exists, with a direct GET when its
	// cache has not seen that secret yet.
	DefaultReadAfterCreate = time.Minute
	// DefaultFreshReads and DefaultDigestWrites are the default rates (per
	// second, with a burst of twice as many, at least one) of GetFresh's
	// direct reads and RememberDigest's patches.
	DefaultFreshReads   = 10
	DefaultDigestWrites = 20
)

// Options configure a Store. A nil *Options means all defaults; a zero
// field means that field's default.
type Options struct {
	// Program is "k3s" (the default) or "rke2". It names the secrets,
	// strings.ToLower(node + ".node-password." + Program), and the type
	// given to the secrets Create makes, Program + ".cattle.io/node-password".
	Program string

	// Namespace holds the node-password secrets. Default "kube-system".
	Namespace string

	// Logger receives the informer's list and watch failures (client-go
	// logs them through the logr logger this Store puts in its context).
	// nil means slog.Default().
	Logger *slog.Logger

	// ReadAfterCreate is how long after Create succeeded or answered
	// AlreadyExists for a node a Get that misses the informer cache asks
	// the API server directly instead of answering ErrNotFound: the cache
	// lags the API by one watch event. Default 1 min; negative is an error.
	ReadAfterCreate time.Duration

	// FreshReads bounds GetFresh's direct GETs per second (burst: twice
	// as many). Past it, GetFresh answers from the cache at once, a miss
	// wrapping verify.ErrNotFresh too (see Store.GetFresh), so a flood of
	// new names cannot flood the API server. Default DefaultFreshReads;
	// negative, NaN or infinite is an error.
	FreshReads float64

	// DigestWrites bounds RememberDigest's patches per second (burst:
	// twice as many). RememberDigest waits for its turn within its
	// context; the Verifier calls it off the request path, so requests
	// never wait for it. Default DefaultDigestWrites; negative, NaN or
	// infinite is an error.
	DigestWrites float64
}

// resolve validates o and fills in defaults.
func (o *Options) resolve() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	r.Program = cmp.Or(r.Program, DefaultProgram)
	r.Namespace = cmp.Or(r.Namespace, DefaultNamespace)
	r.Logger = cmp.Or(r.Logger, slog.Default())
	r.ReadAfterCreate = cmp.Or(r.ReadAfterCreate, DefaultReadAfterCreate)
	r.FreshReads = cmp.Or(r.FreshReads, DefaultFreshReads) // NaN stays NaN
	r.DigestWrites = cmp.Or(r.DigestWrites, DefaultDigestWrites)
	nsErrs := validation.IsDNS1123Label(r.Namespace)
	switch {
	case r.Program != "k3s" && r.Program != "rke2":
		return r, fmt.Errorf("kube: Options.Program is %q, want \"k3s\" or \"rke2\"", r.Program)
	case len(nsErrs) > 0:
		return r, fmt.Errorf("kube: Options.Namespace %q: %s", r.Namespace, strings.Join(nsErrs, "; "))
	case r.ReadAfterCreate < 0:
		return r, errors.New("kube: Options.ReadAfterCreate is negative")
	case !finite(r.FreshReads):
		return r, fmt.Errorf("kube: Options.FreshReads is %v, want a finite rate of 0 or more", r.FreshReads)
	case !finite(r.DigestWrites):
		return r, fmt.Errorf("kube: Options.DigestWrites is %v, want a finite rate of 0 or more", r.DigestWrites)
	}
	return r, nil
}

// finite reports whether rate is neither negative, NaN nor infinite.
func finite(rate float64) bool { return rate >= 0 && rate <= math.MaxFloat64 }
