package kube

import (
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
	switch r.Program {
	case "":
		r.Program = DefaultProgram
	case "k3s", "rke2":
	default:
		return r, fmt.Errorf("kube: Options.Program is %q, want \"k3s\" or \"rke2\"", r.Program)
	}
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	if errs := validation.IsDNS1123Label(r.Namespace); len(errs) > 0 {
		return r, fmt.Errorf("kube: Options.Namespace %q: %s", r.Namespace, strings.Join(errs, "; "))
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	for _, f := range []struct {
		name string
		v    *float64
		def  float64
	}{{"FreshReads", &r.FreshReads, DefaultFreshReads}, {"DigestWrites", &r.DigestWrites, DefaultDigestWrites}} {
		switch {
		case math.IsNaN(*f.v) || math.IsInf(*f.v, 0):
			return r, fmt.Errorf("kube: Options.%s is %v, want a finite rate", f.name, *f.v)
		case *f.v < 0:
			return r, fmt.Errorf("kube: Options.%s is negative", f.name)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	switch {
	case r.ReadAfterCreate < 0:
		return r, fmt.Errorf("kube: Options.ReadAfterCreate is negative")
	case r.ReadAfterCreate == 0:
		r.ReadAfterCreate = DefaultReadAfterCreate
	}
	return r, nil
}
