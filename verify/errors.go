package verify

import (
	"errors"
	"fmt"
	"time"
)

// Errors a caller branches on. Every error this package returns starts with
// "verify: " and wraps at most one of these, so errors.Is tells them apart.
var (
	// ErrMismatchedHashAndPassword means the password does not match the
	// stored hash. It is the only error that means "wrong password".
	ErrMismatchedHashAndPassword = errors.New("verify: password does not match stored hash")

	// ErrInvalidHash means a stored hash is malformed or asks for parameters
	// outside the configured limits. The error says which part is wrong.
	ErrInvalidHash = errors.New("verify: invalid hash")

	// ErrInvalidParams means Params given for hashing a new password are
	// out of range.
	ErrInvalidParams = errors.New("verify: invalid params")

	// ErrInvalidInput means a node name or password given to the Verifier is
	// empty, too long or malformed. Such a request never reaches the Store.
	ErrInvalidInput = errors.New("verify: invalid input")

	// ErrNotFound is wrapped by Store.Get when the node has no stored hash.
	ErrNotFound = errors.New("verify: node not found")

	// ErrExists is wrapped by Store.Create when the node already has a
	// stored hash.
	ErrExists = errors.New("verify: node already exists")

	// ErrNotFresh is wrapped, with ErrNotFound, by a FreshGetter's
	// GetFresh that could not read past its cache (its budget of direct
	// reads spent): the node may have been stored elsewhere moments ago.
	ErrNotFresh = errors.New("verify: not read fresh")

	// ErrOverloaded is matched (errors.Is) by every overload error. Such an
	// error also has a RetryAfter() time.Duration method; see OverloadError.
	ErrOverloaded = errors.New("verify: overloaded")

	// ErrClosed is returned by every call to a Verifier after Close, and
	// to the callers whose work Close cut short.
	ErrClosed = errors.New("verify: verifier closed")
)

// OverloadError is returned when a verification cannot be answered before
// Options.MaxWait. It matches ErrOverloaded with errors.Is. When the work was
// queued (Queued is true) it goes on after the error is returned and its
// outcome is cached, so a retry after RetryAfter is answered from the cache.
type OverloadError struct {
	// After is how long to wait before asking again; always positive.
	// For queued work it is the estimated completion minus half of
	// Options.MaxWait, so that the retry arrives while the work is still
	// running and waits for it; for a full queue it is the estimated time
	// until the queue has drained.
	After time.Duration
	// Queued reports whether the work stays queued (true) or was refused
	// (false): the queue, or the node's share of it, was full.
	Queued bool

	reason string // for Error; empty means from Queued
}

// RetryAfter returns how long the caller should wait before asking again.
func (e *OverloadError) RetryAfter() time.Duration { return e.After }

func (e *OverloadError) Error() string {
	what := e.reason
	switch {
	case what != "":
	case e.Queued:
		what = "work queued"
	default:
		what = "queue full"
	}
	return fmt.Sprintf("verify: overloaded (%s): retry after %v", what, e.After)
}

// Is reports whether target is ErrOverloaded.
func (e *OverloadError) Is(target error) bool { return target == ErrOverloaded }
