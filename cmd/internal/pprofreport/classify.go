package pprofreport

import (
	"strings"

	"github.com/google/pprof/profile"

	"github.com/nodepass/nodepass/verify"
)

// Category is where a CPU sample is counted in the hot-path table.
type Category int

// The categories, in table order. Classify gives the rules.
const (
	// Scrypt is the scrypt work: every sample labelled
	// nodepass.verify=scrypt, the runtime's work on that goroutine
	// included (allocating and zeroing scrypt's buffer, GC assists); in a
	// profile made before the label, x/crypto's scrypt and pbkdf2 code and
	// the crypto/* code they call.
	Scrypt Category = iota
	// Request is the part of a request that missed the cache, labelled
	// nodepass.verify=request: queueing, sharing a computation, waiting
	// for it, enrolling.
	Request
	Cache    // package cache outside those labels: the cache hits' keys and lookups
	HTTPAuth // package httpauth: the node headers and status codes
	Verify   // the rest of package verify: Ensure and Verify, input checks
	// TLSHTTP is crypto/tls, net/http, golang.org/x/net, package net, and
	// crypto/* not under scrypt or the module (handshakes).
	TLSHTTP
	GC      // the garbage collector: mark workers and assists, sweeping, write barriers
	Runtime // the rest of the runtime: allocation, scheduling, maps, system calls
	Other   // the simulator's agents and servers, the benchmark's bookkeeping

	numCategories
)

// OwnCode returns the categories that make up the module's own code.
func OwnCode() []Category { return []Category{Request, Cache, HTTPAuth, Verify} }

var categoryNames = [numCategories]string{
	Scrypt: "scrypt", Request: "request", Cache: "cache",
	HTTPAuth: "httpauth", Verify: "verify", TLSHTTP: "tls/http", GC: "gc",
	Runtime: "runtime", Other: "other",
}

func (c Category) String() string {
	if c < 0 || c >= numCategories {
		return "unknown"
	}
	return categoryNames[c]
}

// The packages that own a sample.
const (
	scryptPkg   = "golang.org/x/crypto/scrypt"
	modulePath  = "github.com/nodepass/nodepass/"
	verifyPkg   = modulePath + "verify"
	cachePkg    = modulePath + "cache"
	httpauthPkg = modulePath + "httpauth"
)

// Classify returns the category of one sample whose stack is frames, the
// leaf first, each a Go function name as in a profile, and whose labels
// are labels (profile.Sample.Label). The rules, which profiles/README.md
// also gives:
//
//  1. A sample labelled nodepass.verify=scrypt is Scrypt and one labelled
//     nodepass.verify=request is Request, whatever its stack.
//  2. Otherwise a leaf in the runtime is GC when a runtime frame up to
//     the first other one is a collector function (isGCFrame), else
//     Runtime.
//  3. Otherwise the first frame from the leaf up in an owning package
//     decides: x/crypto's scrypt or pbkdf2 (Scrypt), the module's cache,
//     httpauth or verify, or crypto/tls, crypto/x509, net/http,
//     golang.org/x/net, net (TLSHTTP). So the HMAC of a cache key is
//     Cache and AES-GCM under crypto/tls is TLSHTTP.
//  4. A stack with no owner is TLSHTTP when its leaf is in crypto/*, and
//     Other otherwise.
//
// No rule names a function of the module.
func Classify(frames []string, labels map[string][]string) Category {
	switch label(labels, verify.ProfileLabel) {
	case verify.ProfileScrypt:
		return Scrypt
	case verify.ProfileRequest:
		return Request
	}
	if len(frames) == 0 {
		return Other
	}
	if isRuntime(pkgOf(frames[0])) {
		for _, f := range frames {
			if !isRuntime(pkgOf(f)) {
				break
			}
			if isGCFrame(f) {
				return GC
			}
		}
		return Runtime
	}
	for _, f := range frames {
		if c, ok := owner(f); ok {
			return c
		}
	}
	if isCrypto(pkgOf(frames[0])) {
		return TLSHTTP
	}
	return Other
}

// label returns the value of a sample's string label key, or "" if it has
// none (runtime/pprof gives each key one value).
func label(labels map[string][]string, key string) string {
	if v := labels[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// owner returns the category of a frame that decides a sample's category.
func owner(fn string) (Category, bool) {
	switch pkg := pkgOf(fn); {
	case pkg == scryptPkg || pkg == "golang.org/x/crypto/pbkdf2":
		return Scrypt, true
	case pkg == cachePkg:
		return Cache, true
	case pkg == httpauthPkg:
		return HTTPAuth, true
	case pkg == verifyPkg:
		return Verify, true
	case pkg == "crypto/tls" || pkg == "crypto/x509" || pkg == "net" ||
		under(pkg, "net/http") || under(pkg, "golang.org/x/net") || under(pkg, "vendor/golang.org/x/net"):
		return TLSHTTP, true
	}
	return 0, false
}

// gcFramePrefixes are the runtime functions of the garbage collector. A
// runtime sample with one of them between its leaf and the first
// non-runtime frame is GC: a background mark worker, a mark assist paid
// by an allocating goroutine, sweeping (background or paid on
// allocation), or a write-barrier buffer flush.
var gcFramePrefixes = []string{
	"runtime.gc", // gcBgMarkWorker, gcAssistAlloc, gcDrain*, gcStart, gcMarkDone, gcMarkTermination, gcWriteBarrier*
	"runtime.GC",
	"runtime.markroot",
	"runtime.scanobject",
	"runtime.scanblock",
	"runtime.scanstack",
	"runtime.scanSpan",
	"runtime.greyobject",
	"runtime.wbBufFlush",
	"runtime.bulkBarrierPreWrite",
	"runtime.bgsweep",
	"runtime.sweepone",
	"runtime.deductSweepCredit",
	"runtime.(*sweepLocked).sweep",
	"runtime.(*mheap).reclaim",
	"runtime.(*gcWork).",
	"runtime.(*gcControllerState).",
}

func isGCFrame(fn string) bool {
	for _, p := range gcFramePrefixes {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

func isRuntime(pkg string) bool {
	return pkg == "runtime" || strings.HasPrefix(pkg, "internal/runtime/") || strings.HasPrefix(pkg, "runtime/internal/")
}

func isCrypto(pkg string) bool {
	return under(pkg, "crypto") || under(pkg, "golang.org/x/crypto") || under(pkg, "vendor/golang.org/x/crypto")
}

func under(pkg, base string) bool {
	return pkg == base || strings.HasPrefix(pkg, base+"/")
}

// pkgOf returns the import path of a Go function name: the text up to the
// first dot after the last slash, looking only before any receiver or type
// argument (which may hold slashes and dots of their own).
func pkgOf(fn string) string {
	head := fn
	if i := strings.IndexAny(head, "(["); i >= 0 {
		head = head[:i]
	}
	slash := strings.LastIndexByte(head, '/')
	if dot := strings.IndexByte(head[slash+1:], '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return head
}

// asyncPreempt is the function the runtime makes a goroutine call when it
// preempts it with a signal.
const asyncPreempt = "runtime.asyncPreempt"

// stack returns a sample's function names, the leaf first, inlined calls
// included (a location lists its inlined functions innermost first),
// reusing buf.
func stack(s *profile.Sample, buf []string) []string {
	buf = buf[:0]
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil {
				buf = append(buf, ln.Function.Name)
			}
		}
	}
	return buf
}

// skipPreempt returns frames without a leaf runtime.asyncPreempt.
//
// A sample whose leaf is asyncPreempt (its first instruction, not the
// preemption's work, which is asyncPreempt2 and below) was taken as the
// thread came back to the code the runtime had just preempted: the
// profiling signal was pending while the preemption signal was handled,
// typically because the thread had been off its CPU. Its CPU time was
// spent in the interrupted function, which is where it is counted. On a
// loaded machine this was 10 to 35% of the samples of a scrypt-bound
// profile.
func skipPreempt(frames []string) []string {
	if len(frames) > 1 && frames[0] == asyncPreempt {
		return frames[1:]
	}
	return frames
}
