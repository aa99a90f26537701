package main

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"lifeboat/backend"
	"lifeboat/backend/s3"
	"lifeboat/checkpoint"
	"lifeboat/crypt"
	"lifeboat/profile"
	"lifeboat/recovery"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/capture"
)

// Exit codes. docs/exit-codes.md lists them; this is the one place they are chosen.
const (
	exitOK          = 0
	exitFailure     = 1   // any error not listed below
	exitUsage       = 2   // bad flags or arguments, or no password source
	exitPartial     = 3   // reserved: a capture finished but is partial
	exitNoRepo      = 10  // no repository at the location
	exitWrongPass   = 11  // wrong password, or no key file could be read
	exitLocked      = 12  // the repository is locked by another process
	exitCorrupt     = 13  // stored data failed verification or is missing
	exitNewerFormat = 14  // repository written by a newer lifeboat
	exitRefused     = 15  // a key operation was refused to protect data (last key)
	exitTierLocked  = 16  // the key in use does not unlock the tier needed
	exitNoSpace     = 17  // the storage is full; nothing half-written is visible
	exitBrowserRun  = 18  // a browser is using a profile to capture; retry when it stopped
	exitProfileBad  = 19  // a restore finished, but profile validation flagged files
	exitQuiesce     = 20  // the workspace could not be quiesced in time; retryable
	exitRecovering  = 21  // the workspace is lost or being recovered; capture or restart refused
	exitNoAccess    = 22  // the repository is there but this user may not read it (permission denied)
	exitUnavailable = 23  // the repository's storage could not be reached or kept failing; retryable
	exitStateDown   = 24  // the PostgreSQL state store cannot be reached or refused the login; retryable
	exitInterrupted = 130 // interrupted by a signal
	_               = exitPartial
)

// isCobraUsage recognises cobra's own errors for unknown commands and
// wrong argument counts, which it returns as plain errors.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "requires at most", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// usageError marks errors in how the command was called.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode maps an error to the documented exit code.
func exitCode(err error) int {
	var ue usageError
	var pe partialError
	var fe profileFlaggedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &pe):
		return exitPartial
	case errors.As(err, &fe):
		return exitProfileBad
	case errors.As(err, &ue), isCobraUsage(err), errors.Is(err, profile.ErrNotProfile), errors.Is(err, capture.ErrSensitivePath), errors.Is(err, capture.ErrBadExclude), errors.Is(err, checkpoint.ErrCaptureOverlaps),
		errors.Is(err, recovery.ErrUnknownWorkspace), errors.Is(err, recovery.ErrBadWorkspaceID),
		errors.Is(err, recovery.ErrUnknownProvider), errors.Is(err, recovery.ErrInstanceMissing), errors.Is(err, recovery.ErrInvalidChange):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, recovery.ErrRecovering), errors.Is(err, recovery.ErrLost):
		return exitRecovering
	case errors.Is(err, recovery.ErrQuiesceTimeout):
		return exitQuiesce
	case errors.Is(err, profile.ErrBrowserRunning):
		return exitBrowserRun
	case errors.Is(err, repo.ErrLocked), errors.Is(err, repo.ErrLockLost), errors.Is(err, recovery.ErrStoreBusy):
		return exitLocked
	case errors.Is(err, repo.ErrAccessDenied), errors.Is(err, s3.ErrRefused):
		return exitNoAccess
	case errors.Is(err, recovery.ErrStateUnavailable):
		return exitStateDown
	case errors.Is(err, repo.ErrNoRepository), errors.Is(err, s3.ErrConfig):
		return exitNoRepo
	case errors.Is(err, crypt.ErrWrongPassword), errors.Is(err, repo.ErrNoUsableKey):
		return exitWrongPass
	case errors.Is(err, repo.ErrNewerFormat), errors.Is(err, recovery.ErrStoreNewer):
		return exitNewerFormat
	case errors.Is(err, repo.ErrLastKey), errors.Is(err, repo.ErrKeyInUse), errors.Is(err, repo.ErrRepoExists),
		errors.Is(err, recovery.ErrWorkspaceExists), errors.Is(err, recovery.ErrNoNativeCheckpoint):
		return exitRefused
	case errors.Is(err, crypt.ErrTierLocked), errors.Is(err, snapshot.ErrSensitiveLocked), errors.Is(err, snapshot.ErrExportSensitive):
		return exitTierLocked
	case errors.Is(err, backend.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return exitNoSpace
	case errors.Is(err, backend.ErrUnavailable):
		return exitUnavailable
	case errors.Is(err, repo.ErrCorrupt), errors.Is(err, repo.ErrPackMissing), errors.Is(err, repo.ErrBlobNotFound),
		errors.Is(err, crypt.ErrAuth), errors.Is(err, repo.ErrDamaged):
		return exitCorrupt
	}
	return exitFailure
}
