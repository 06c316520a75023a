package pprofreport

import (
	"strings"

	"github.com/google/pprof/profile"
)

// Category is where a CPU sample is counted in the hot-path table.
type Category int

// The categories, in table order. Classify gives the rules.
const (
	// Scrypt is the scrypt hot path: golang.org/x/crypto/scrypt and
	// pbkdf2, and the crypto/* code (SHA-256, HMAC) they call.
	Scrypt Category = iota
	// Cache is the verified-tuple cache: package cache, and the verify
	// functions that consult it.
	Cache
	// Flights is the sharing of one computation between identical
	// concurrent requests (the Verifier's singleflight).
	Flights
	// Admission is the bounded scrypt slots, the queue, shedding and the
	// delays for failing names.
	Admission
	// HTTPAuth is package httpauth: the node headers and status codes.
	HTTPAuth
	// Verify is the rest of package verify: Ensure and Verify themselves,
	// input checks, hash parsing, store calls.
	Verify
	// TLSHTTP is crypto/tls, net/http (with its HTTP/2 bundle),
	// golang.org/x/net, package net, and crypto/* not under scrypt or the
	// module (handshakes: ECDSA, ECDH, AES-GCM).
	TLSHTTP
	// GC is the garbage collector: background mark workers, mark assists,
	// sweeping, write barriers.
	GC
	// Runtime is the rest of the runtime: allocation, zeroing, scheduling,
	// maps, system calls made by the runtime.
	Runtime
	// Other is everything else: the simulator's agents and servers, the
	// benchmark's own bookkeeping.
	Other

	numCategories
)

// Categories returns every category in table order.
func Categories() []Category {
	out := make([]Category, numCategories)
	for i := range out {
		out[i] = Category(i)
	}
	return out
}

// OwnCode returns the categories that make up the module's own code.
func OwnCode() []Category { return []Category{Cache, Flights, Admission, HTTPAuth, Verify} }

// IsOwn reports whether c is part of the module's own code.
func (c Category) IsOwn() bool { return c >= Cache && c <= Verify }

var categoryNames = [numCategories]string{
	Scrypt: "scrypt", Cache: "cache", Flights: "flights", Admission: "admission",
	HTTPAuth: "httpauth", Verify: "verify", TLSHTTP: "tls/http", GC: "gc",
	Runtime: "runtime", Other: "other",
}

func (c Category) String() string {
	if c < 0 || c >= numCategories {
		return "unknown"
	}
	return categoryNames[c]
}

// The module's packages.
const (
	modulePath  = "github.com/nodepass/nodepass/"
	verifyPkg   = modulePath + "verify"
	cachePkg    = modulePath + "cache"
	httpauthPkg = modulePath + "httpauth"
)

// Classify returns the category of one sample whose stack is frames, the
// leaf first, each a Go function name as in a profile
// ("golang.org/x/crypto/scrypt.salsaXOR", "runtime.mallocgc"). The rules,
// also written out in profiles/README.md:
//
//  1. A leaf in package runtime (or internal/runtime/...) is GC when one
//     of the runtime frames from the leaf up to the first non-runtime
//     frame is a collector function (runtime.gc*, mark, scan, sweep,
//     write-barrier flush; see isGCFrame); otherwise it is Runtime. The
//     runtime's work for any caller, including the zeroing of scrypt's
//     buffer, stays in the runtime.
//  2. Otherwise the stack is walked from the leaf up to the first frame
//     of an owner: golang.org/x/crypto/scrypt or pbkdf2 (Scrypt), the
//     module's verify, cache or httpauth (the own-code category of that
//     frame's function), or crypto/tls, crypto/x509, net/http,
//     golang.org/x/net, package net (TLSHTTP). So SHA-256 and HMAC under
//     scrypt are Scrypt, the HMAC of the cache keys is Cache, AES-GCM
//     under crypto/tls is TLSHTTP, and a sync.Mutex taken by the
//     admission queue is Admission.
//  3. A stack with no owner is TLSHTTP when its leaf is in crypto/* (the
//     certificates made at start), and Other otherwise.
func Classify(frames []string) Category {
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

// owner returns the category of a frame that decides a sample's category.
func owner(fn string) (Category, bool) {
	switch pkg := pkgOf(fn); {
	case pkg == "golang.org/x/crypto/scrypt" || pkg == "golang.org/x/crypto/pbkdf2":
		return Scrypt, true
	case pkg == cachePkg:
		return Cache, true
	case pkg == httpauthPkg:
		return HTTPAuth, true
	case pkg == verifyPkg:
		return verifyCategory(strings.TrimPrefix(fn, verifyPkg+".")), true
	case pkg == "crypto/tls" || pkg == "crypto/x509" || pkg == "net" ||
		under(pkg, "net/http") || under(pkg, "golang.org/x/net") || under(pkg, "vendor/golang.org/x/net"):
		return TLSHTTP, true
	}
	return 0, false
}

// verifyCategory sorts a function of package verify (name without the
// package, e.g. "(*Verifier).share.func1") by its type and method.
func verifyCategory(name string) Category {
	typ, method := "", name
	if strings.HasPrefix(name, "(*") {
		if i := strings.Index(name, ")."); i > 0 {
			typ, method = name[2:i], name[i+2:]
		}
	} else if i := strings.Index(name, "."); i > 0 && isType(name[:i]) {
		typ, method = name[:i], name[i+1:]
	}
	if i := strings.IndexAny(method, ".["); i >= 0 {
		method = method[:i] // closures (func1) and instantiations count with their function
	}
	switch typ {
	case "admission", "ticket", "nameQueue", "failures", "OverloadError":
		return Admission
	case "flight":
		return Flights
	}
	switch method {
	case "acquire", "runSlot", "withSlot", "shedQueued", "recheckInterval", "hold", "newAdmission", "newFailures":
		return Admission
	case "share", "run", "await":
		return Flights
	case "lookup", "known", "recordMatch", "outcome":
		return Cache
	}
	return Verify
}

// isType reports whether a name component is one of package verify's
// types with value-receiver methods.
func isType(s string) bool {
	switch s {
	case "Params", "Limits", "Options", "Stats", "hash", "ticket", "admission", "nameQueue", "failures", "flight":
		return true
	}
	return false
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

// under reports whether pkg is base or below it.
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

// skipPreempt returns frames without a leaf runtime.asyncPreempt, and
// whether there was one.
//
// A sample whose leaf is asyncPreempt (its first instruction, not the
// preemption's work, which is asyncPreempt2 and below) was taken as the
// thread came back to the code the runtime had just preempted: the
// profiling signal was pending while the preemption signal was handled,
// typically because the thread had been off its CPU (its CPU timer expired
// on the kernel tick that descheduled it; the runtime asked for a
// preemption meanwhile). Its CPU time was spent in the interrupted
// function, which is where it is counted. On a loaded machine this was 10
// to 35% of the samples of a scrypt-bound profile.
func skipPreempt(frames []string) ([]string, bool) {
	if len(frames) > 1 && frames[0] == asyncPreempt {
		return frames[1:], true
	}
	return frames, false
}
