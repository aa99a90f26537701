package recovery

import (
	"context"
	"errors"
	"fmt"
	"lifeboat/backend"
	"time"

	"lifeboat/profile"
	"lifeboat/providers"
)

// Outcome is how a capture request ended.
type Outcome string

const (
	Captured  Outcome = "captured"  // a new checkpoint was written, verified and promoted
	Partial   Outcome = "partial"   // a snapshot was written but some paths were unreadable; not promoted
	Throttled Outcome = "throttled" // a park inside the minimum interval: nothing captured
	Unchanged Outcome = "unchanged" // periodic: nothing changed since the last good checkpoint
	Failed    Outcome = "failed"    // the capture failed; see Error
	// QuiesceTimeout: the writers could not be paused (or the browser
	// did not stop) within the quiesce timeout. Nothing was captured.
	// Retryable.
	QuiesceTimeout Outcome = "quiesce_timeout"
	Cancelled      Outcome = "cancelled"   // the request was cancelled
	Interrupted    Outcome = "interrupted" // found later: the process died mid-capture
	NativeFailed   Outcome = "native_failed"
)

// ErrQuiesceTimeout: the workspace could not be quiesced in time.
var ErrQuiesceTimeout = errors.New("cannot quiesce the workspace in time")

// Receipt is the typed answer to Park, Capture and a periodic round. Every
// caller that joined one capture gets the same receipt.
type Receipt struct {
	Workspace string    `json:"workspace"`
	Reason    Reason    `json:"reason"`
	Outcome   Outcome   `json:"outcome"`
	Snapshot  string    `json:"snapshot,omitempty"` // the new snapshot (captured or partial)
	LastGood  string    `json:"last_good,omitempty"`
	Attempt   int       `json:"attempt,omitempty"` // failures in a row, this one included
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished"`
	Files     uint64    `json:"files,omitempty"`
	Bytes     uint64    `json:"bytes,omitempty"`
	NewBytes  uint64    `json:"new_bytes,omitempty"`
	Problems  int       `json:"problems,omitempty"` // paths a partial snapshot could not read
	// Listed: a periodic round that captured nothing listed the files
	// (one lstat per entry) to decide; false when the server's watches
	// vouched that nothing changed since the last listing.
	Listed bool `json:"listed,omitempty"`
	// Prefixes are files that kept growing while they were read, captured
	// as a verified prefix (the snapshot is complete; see docs/guide.md).
	Prefixes []string `json:"prefixes,omitempty"`
	// Paused: the instance itself was paused through its provider (a
	// container's cgroup freezer) while it was read and checkpointed.
	Paused bool `json:"paused,omitempty"`
	// Native is the native checkpoint taken after this capture, if any;
	// NativeError says why one was not, when it was due.
	Native      providers.CheckpointID `json:"native,omitempty"`
	NativeError string                 `json:"native_error,omitempty"`
	// RetentionError: the retention run after the capture failed (the
	// capture itself stands).
	RetentionError string `json:"retention_error,omitempty"`
	Retryable      bool   `json:"retryable"`
	Error          string `json:"error,omitempty"`
	Err            error  `json:"-"`

	mark string // the ID of this capture's in-flight mark, once set
}

// ownsMark reports whether w's in-flight mark is r's capture's.
func (r *Receipt) ownsMark(w *Workspace) bool {
	return r.mark != "" && w.InFlight != nil && w.InFlight.ID == r.mark
}

// clearMark clears w's in-flight mark if it is r's capture's: a mark
// another server recorded as interrupted, or replaced with its own
// capture's after this one's lock in the state store was lost, stays.
func (r *Receipt) clearMark(w *Workspace) {
	if r.ownsMark(w) {
		w.InFlight = nil
	}
}

// OK reports whether the request left a good checkpoint that is current:
// captured now, or throttled or unchanged after an earlier one.
func (r Receipt) OK() bool {
	return r.Outcome == Captured || r.Outcome == Throttled || r.Outcome == Unchanged
}

func (r *Receipt) fail(o Outcome, err error) {
	r.Outcome, r.Err, r.Error = o, err, err.Error()
	r.Retryable = Retryable(err)
}

// Retryable reports whether a failed capture may succeed when simply tried
// again later: a quiesce timeout, a running browser, a provider outage or
// rate limit, a repository storage outage (S3 unreachable or failing), a
// cancellation.
func Retryable(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrQuiesceTimeout), errors.Is(err, profile.ErrBrowserRunning),
		errors.Is(err, providers.ErrUnavailable), errors.Is(err, providers.ErrRateLimited), errors.Is(err, backend.ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrInterrupted), errors.Is(err, ErrLockLost), errors.Is(err, ErrMarkLost):
		return true
	}
	return false
}

// ErrInterrupted: a capture was found unfinished, its process dead (no
// one held the workspace's lease; see inflight.go).
var ErrInterrupted = errors.New("capture interrupted: the process running it ended before it finished")

// PanicError is a capture that panicked; the panic was recovered, the
// writers resumed and the failure recorded.
type PanicError struct{ Value any }

func (e *PanicError) Error() string { return fmt.Sprintf("capture panicked: %v", e.Value) }
