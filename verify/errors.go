package verify

import (
	"errors"
	"fmt"
	"time"
)

// Errors a caller branches on. Every error this package returns starts
// with "verify: " and wraps at most one of them.
var (
	ErrMismatchedHashAndPassword = errors.New("verify: password does not match stored hash")
	ErrInvalidHash               = errors.New("verify: invalid hash") // malformed, or past Limits
	ErrInvalidParams             = errors.New("verify: invalid params")
	ErrInvalidInput              = errors.New("verify: invalid input")
	ErrNotFound                  = errors.New("verify: node not found")      // from Store.Get
	ErrExists                    = errors.New("verify: node already exists") // from Store.Create
	ErrNotFresh                  = errors.New("verify: not read fresh")      // see FreshGetter
	ErrOverloaded                = errors.New("verify: overloaded")          // every OverloadError
	ErrClosed                    = errors.New("verify: verifier closed")
)

// OverloadError says to ask again After: the request could not be
// answered within Options.MaxWait.
type OverloadError struct {
	After  time.Duration // positive
	Queued bool          // the work goes on, its outcome cached for the retry

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
