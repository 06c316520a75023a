package verify

import (
	"errors"
	"fmt"
	"time"
)

// Errors a caller branches on. Every error this package returns starts with
// "verify: " and wraps at most one of these.
var (
	// ErrMismatchedHashAndPassword is the only error that means "wrong password".
	ErrMismatchedHashAndPassword = errors.New("verify: password does not match stored hash")
	// ErrInvalidHash: a stored hash is malformed or beyond the Limits.
	ErrInvalidHash = errors.New("verify: invalid hash")
	// ErrInvalidParams: Params for a new hash are out of range.
	ErrInvalidParams = errors.New("verify: invalid params")
	// ErrInvalidInput: a node name or password is empty, too long or
	// malformed (a node name that cannot name its secret: see Verify).
	ErrInvalidInput = errors.New("verify: invalid input")
	// ErrNotFound is wrapped by Store.Get when the node has no stored hash.
	ErrNotFound = errors.New("verify: node not found")
	// ErrExists is wrapped by Store.Create when the node has a stored hash.
	ErrExists = errors.New("verify: node already exists")
	// ErrNotFresh is wrapped, with ErrNotFound, by a GetFresh that could
	// not read past its cache (see FreshGetter).
	ErrNotFresh = errors.New("verify: not read fresh")
	// ErrOverloaded is matched by every OverloadError.
	ErrOverloaded = errors.New("verify: overloaded")
	// ErrClosed: the Verifier was closed, or Close cut the work short.
	ErrClosed = errors.New("verify: verifier closed")
)

// OverloadError says to ask again after RetryAfter: the request could not
// be answered within Options.MaxWait. With Queued, its work goes on and its
// outcome is cached for the retry. It matches ErrOverloaded.
type OverloadError struct {
	After  time.Duration // how long to wait before asking again; positive
	Queued bool          // the work stays queued (false: the queue was full)

	reason string // for Error; empty means from Queued
}

// RetryAfter returns After.
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

// Is matches ErrOverloaded.
func (e *OverloadError) Is(target error) bool { return target == ErrOverloaded }
