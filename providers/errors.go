package providers

import (
	"errors"
	"fmt"
	"time"
)

// Kind classifies a provider failure by what the caller may do about it.
type Kind string

const (
	// KindUnavailable: outage, timeout, connection refused, 5xx. Retry
	// later; never treat as missing.
	KindUnavailable Kind = "unavailable"
	// KindUnauthorized: 401/403, a bad key, an SSH auth failure. Fix the
	// credentials; retrying will not help.
	KindUnauthorized Kind = "unauthorized"
	// KindRateLimited: 429 or the platform's equivalent; RetryAfter says
	// when to try again when the provider said.
	KindRateLimited Kind = "rate_limited"
	// KindUnsupported: the adapter does not support the operation (see
	// Capabilities), or a tree holds an entry it cannot create (a socket,
	// a device; see FileSupport). The message names the entry's path
	// relative to the tree and what to do. Retrying will not help.
	KindUnsupported Kind = "unsupported"
	// KindPermission: a path in the instance or in the source tree refused
	// access (EACCES, EPERM, an SFTP permission denied). The message names
	// the path (relative to the tree where there is one) and says to fix
	// its permissions; retrying will not help.
	KindPermission Kind = "permission"
	// KindInvalid: the request was refused as malformed (400, 422, a bad
	// instance id). A bug or bad input; do not retry unchanged.
	KindInvalid Kind = "invalid"
	// KindConflict: the instance is in a state that does not allow the
	// operation (409; e.g. stopped when running is needed).
	KindConflict Kind = "conflict"
)

// Error is the one error type every adapter returns.
type Error struct {
	Provider   string        // adapter name
	Op         string        // "inspect", "create", "read files", ...
	Instance   InstanceID    // may be empty
	Kind       Kind          //
	Code       string        // the provider's own code: an HTTP status, an SSH error class
	RetryAfter time.Duration // for KindRateLimited, when known
	Err        error         // underlying cause; never holds credentials
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Provider, e.Op)
	if e.Instance != "" {
		s += fmt.Sprintf(" %s", e.Instance)
	}
	s += fmt.Sprintf(": %s", e.Kind)
	if e.Code != "" {
		s += fmt.Sprintf(" (%s)", e.Code)
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(", retry after %s", e.RetryAfter)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap makes err an *Error of adapter name's op on id, its kind and code
// from classify. An error that already is (or wraps) an *Error is
// returned as it is; nil stays nil.
func Wrap(name, op string, id InstanceID, err error, classify func(error) (Kind, string)) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return err
	}
	k, code := classify(err)
	return &Error{Provider: name, Op: op, Instance: id, Kind: k, Code: code, Err: err}
}

// Errorf makes an *Error of kind k whose cause is the formatted message.
func Errorf(name, op string, id InstanceID, k Kind, format string, args ...any) error {
	return &Error{Provider: name, Op: op, Instance: id, Kind: k, Err: fmt.Errorf(format, args...)}
}

// CheckCommand refuses an empty argv given to Exec (KindInvalid), in
// the same words for every provider.
func CheckCommand(name, op string, id InstanceID, argv []string) error {
	if len(argv) == 0 {
		return Errorf(name, op, id, KindInvalid, "empty command: give the program to run and its arguments")
	}
	return nil
}

// Is lets errors.Is(err, ErrUnavailable) and friends match by Kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(kindError)
	return ok && Kind(k) == e.Kind
}

type kindError Kind

func (k kindError) Error() string { return "provider " + string(k) }

// Sentinels for errors.Is: errors.Is(err, providers.ErrRateLimited).
var (
	ErrUnavailable  error = kindError(KindUnavailable)
	ErrUnauthorized error = kindError(KindUnauthorized)
	ErrRateLimited  error = kindError(KindRateLimited)
	ErrUnsupported  error = kindError(KindUnsupported)
	ErrInvalid      error = kindError(KindInvalid)
	ErrConflict     error = kindError(KindConflict)
	ErrPermission   error = kindError(KindPermission)
)

// KindOf returns the Kind of a provider error, or "" when err is not one.
func KindOf(err error) Kind {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Kind
	}
	return ""
}

// RetryAfter returns how long a rate-limited caller should wait, when the
// provider said.
func RetryAfter(err error) (time.Duration, bool) {
	var pe *Error
	if errors.As(err, &pe) && pe.Kind == KindRateLimited && pe.RetryAfter > 0 {
		return pe.RetryAfter, true
	}
	return 0, false
}
