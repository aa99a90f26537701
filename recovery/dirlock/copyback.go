package dirlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"time"

	"lifeboat/providers"
	"lifeboat/snapshot"
)

// FailureClass says what a failed copy-back allows next.
type FailureClass string

const (
	// BeforeWrite: the attempt failed before it wrote any file into the
	// target (a connection, a read of the source). The only class retried.
	BeforeWrite FailureClass = "before_write"
	// AfterWrite: the attempt had started writing into the target. Never
	// retried: a second attempt over a half-written target could mix two
	// partial copies; the caller keeps the source and records a repair hold.
	AfterWrite FailureClass = "after_write"
	// UnsafeArchive: the source holds an entry that would be written
	// outside the target, or cannot be restored faithfully. Never retried:
	// it is the same on every attempt.
	UnsafeArchive FailureClass = "unsafe_archive"
	// Unsupported: the source holds a file type the provider cannot create
	// (a socket, a device, a fifo on a host that cannot make one:
	// providers.ErrUnsupported, whose message names the entry). Never
	// retried: it is the same on every attempt. Remove or exclude the
	// entry, or recover into a provider that can create it.
	Unsupported FailureClass = "unsupported"
	// Permission: a path in the source or the target refused access
	// (providers.ErrPermission, EACCES/EPERM), or the provider refused the
	// credentials (providers.ErrUnauthorized). Never retried: someone must
	// fix permissions or credentials first.
	Permission FailureClass = "permission"
	// Cancelled: the caller's context ended. Never retried.
	Cancelled FailureClass = "cancelled"
)

var (
	// ErrUnsafeArchive marks a copy-back source that holds an unsafe
	// entry; a copy-back wraps it (snapshot.ErrUnsafeEntry counts too).
	ErrUnsafeArchive = errors.New("unsafe archive refused")
	// ErrWriteStarted marks a failure after the copy-back began writing,
	// for copy-backs that cannot call Attempt.Writing first.
	ErrWriteStarted = errors.New("copy-back failed after writing into the target started")
	// ErrCopyBackFailed matches every *CopyBackError.
	ErrCopyBackFailed = errors.New("copy-back failed")
)

// Classify puts a copy-back failure in its class; wrote says whether the
// attempt had begun writing into the target. The first match wins: unsafe
// archive, unsupported, permission, after write, cancelled, before write.
// Only BeforeWrite is retried.
func Classify(err error, wrote bool) FailureClass {
	switch {
	case errors.Is(err, ErrUnsafeArchive), errors.Is(err, snapshot.ErrUnsafeEntry):
		return UnsafeArchive
	case errors.Is(err, providers.ErrUnsupported):
		return Unsupported
	case errors.Is(err, providers.ErrPermission), errors.Is(err, fs.ErrPermission), errors.Is(err, providers.ErrUnauthorized):
		return Permission
	case wrote, errors.Is(err, ErrWriteStarted):
		return AfterWrite
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return Cancelled
	default:
		return BeforeWrite
	}
}

// RetryPolicy is how often a copy-back that failed before writing is tried.
type RetryPolicy struct {
	Attempts int           // attempts in total; default 3
	Backoff  time.Duration // pause before the second attempt, doubled for each later one; default 250ms
}

// DefaultRetryPolicy: 3 attempts in total, pausing 250ms, then 500ms.
var DefaultRetryPolicy = RetryPolicy{Attempts: 3, Backoff: 250 * time.Millisecond}

// Decide says whether to try again after attempt n (1 for the first)
// failed with class c, and how long to pause first.
func (p RetryPolicy) Decide(n int, c FailureClass) (retry bool, pause time.Duration) {
	if p.Attempts <= 0 {
		p.Attempts = DefaultRetryPolicy.Attempts
	}
	if p.Backoff <= 0 {
		p.Backoff = DefaultRetryPolicy.Backoff
	}
	if c != BeforeWrite || n < 1 || n >= p.Attempts {
		return false, 0
	}
	return true, p.Backoff << (n - 1)
}

// Attempt is handed to each try of a copy-back.
type Attempt struct {
	N     int // 1 for the first
	wrote atomic.Bool
}

// Writing records that the attempt is about to write into the target. Call
// it before creating or changing the first file there: from then on a
// failure is never retried.
func (a *Attempt) Writing() { a.wrote.Store(true) }

// Wrote reports whether Writing was called.
func (a *Attempt) Wrote() bool { return a.wrote.Load() }

// CopyBackError is a copy-back that failed for good.
type CopyBackError struct {
	Class    FailureClass
	Attempts int
	Err      error // the last attempt's error
}

func (e *CopyBackError) Error() string {
	why := map[FailureClass]string{
		BeforeWrite:   "nothing was written into the target; gave up",
		AfterWrite:    "it had started writing into the target, so it was not retried (the source is kept; an operator must resolve it)",
		UnsafeArchive: "the source holds an unsafe entry, so it was not retried",
		Unsupported:   "the source holds a file type the provider cannot create (named below), so it was not retried; remove or exclude it from the workspace, or recover into a provider that can create it",
		Permission:    "permission was refused, so it was not retried; fix the permissions or credentials and run it again",
		Cancelled:     "it was cancelled",
	}[e.Class]
	return fmt.Sprintf("%v after %d attempt(s) [%s]: %s: %v", ErrCopyBackFailed, e.Attempts, e.Class, why, e.Err)
}

func (e *CopyBackError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCopyBackFailed) true.
func (e *CopyBackError) Is(target error) bool { return target == ErrCopyBackFailed }

// CopyBack runs try until it succeeds or p.Decide says stop, pausing on clk
// between attempts. A failure is a *CopyBackError with its class.
func CopyBack(ctx context.Context, clk Clock, p RetryPolicy, try func(ctx context.Context, a *Attempt) error) error {
	for n := 1; ; n++ {
		a := &Attempt{N: n}
		err := try(ctx, a)
		if err == nil {
			return nil
		}
		c := Classify(err, a.Wrote())
		retry, pause := p.Decide(n, c)
		if !retry {
			return &CopyBackError{Class: c, Attempts: n, Err: err}
		}
		if !sleep(ctx, clk, pause) {
			return &CopyBackError{Class: Cancelled, Attempts: n, Err: errors.Join(err, ctx.Err())}
		}
	}
}
