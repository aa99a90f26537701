package restore

import (
	"errors"
	"fmt"
	"strings"
)

// Restore errors; an Error wraps them with the paths affected.
var (
	// ErrTargetExists: the target exists and Options.Replace is off.
	ErrTargetExists = errors.New("restore target already exists")
	// ErrContentMismatch: a restored file does not hold the snapshot's
	// bytes (fewer or more were written than its size).
	ErrContentMismatch = errors.New("restored file does not match the snapshot")
)

// Error is a failed restore tied to the snapshot entries it
// affects: a refused entry, or every file that needs a missing or corrupt
// chunk. Match the cause with errors.Is (snapshot.ErrUnsafeEntry, repo.ErrCorrupt,
// repo.ErrPackMissing, repo.ErrBlobNotFound, ...).
type Error struct {
	Paths []string // slash paths from the snapshot root ("" is the root); raw bytes
	Err   error
}

// restoreMaxNamed caps the paths an error message lists.
const restoreMaxNamed = 10

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Paths {
		if i == restoreMaxNamed {
			fmt.Fprintf(&b, " and %d more", len(e.Paths)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(safeDisplay(p))
	}
	return fmt.Sprintf("%s: %v", b.String(), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
