package dirlock

import (
	"errors"
	"fmt"
	"time"
)

// ErrBusy: the target's lock is held by another operation. errors.Is
// matches a *BusyError.
var ErrBusy = errors.New("target directory is locked by another operation")

// ErrLockFileReplaced: the lock file at the lock's path is no longer the
// inode this lock holds. Something outside Lifeboat deleted or replaced it,
// which breaks exclusion (see the package doc); stop writing.
var ErrLockFileReplaced = errors.New("directory-merge lock file was deleted or replaced while in use")

// BusyError says who kept a caller out of a target and for how long it
// tried.
type BusyError struct {
	Target      string        // canonical target path
	LockFile    string        // <state root>/locks/directory-merge/<hash>.lock
	Holder      Owner         // from the sidecar, or this process's table
	HolderKnown bool          // false: no readable sidecar (holder has not written it yet)
	Waited      time.Duration // by the Locker's clock
	Attempts    int
}

func (e *BusyError) Error() string {
	holder := "another process that has not recorded itself yet"
	switch {
	case e.HolderKnown && e.Holder.Stale:
		holder = fmt.Sprintf("an unrecorded holder (the owner file still names %s, which is no longer running, so it is not the holder)", e.Holder)
	case e.HolderKnown:
		holder = e.Holder.String()
	}
	return fmt.Sprintf("%v: %s is locked by %s; gave up after %s and %d attempt(s). "+
		"Wait for that operation to finish and try again; a holder that dies releases the lock at once (owner file: %s)",
		ErrBusy, e.Target, holder, e.Waited.Round(time.Millisecond), e.Attempts, ownerPath(e.LockFile))
}

func (e *BusyError) Unwrap() error { return ErrBusy }
