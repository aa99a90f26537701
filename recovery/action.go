package recovery

import (
	"errors"
	"fmt"

	"lifeboat/providers"
	"lifeboat/recovery/dirlock"
	"lifeboat/repo"
)

// actionFor says what fixes an operation that failed with err.
func actionFor(err error, op Operation) string {
	again := "then approve the recovery again with a new idempotency key (the last good checkpoint is unchanged)"
	var cbe *dirlock.CopyBackError
	if errors.As(err, &cbe) {
		switch cbe.Class {
		case dirlock.Unsupported:
			return "the checkpoint holds a file the provider " + op.Provider + " cannot create (the error names it); nothing was written and the replacement was destroyed. " +
				"Approve an earlier checkpoint of the offer without it, or restore this one by hand on a host that can hold it: " +
				"`lifeboat restore --target DIR " + op.Checkpoint + "` restores every file"
		case dirlock.Permission:
			return "the replacement refused access to a path (the error names it); nothing was written and the replacement was destroyed. " +
				"Fix the permissions (or the provider's credentials), " + again
		case dirlock.UnsafeArchive:
			return "the restored tree holds an entry that cannot be written safely (the error names it); nothing was written. " +
				"Approve an earlier checkpoint of the offer, or restore it by hand with `lifeboat restore`"
		case dirlock.BeforeWrite:
			return "writing into the replacement failed before anything was written, on every attempt; the replacement was destroyed. " +
				"Check that the provider " + op.Provider + " is reachable and has room, " + again
		}
	}
	switch {
	case errors.Is(err, repo.ErrCorrupt), errors.Is(err, repo.ErrPackMissing), errors.Is(err, repo.ErrBlobNotFound):
		return fmt.Sprintf("checkpoint %s cannot be restored from the repository: approve an earlier checkpoint from the offer's candidates, and run `lifeboat check --read-data` on the repository", short(op.Checkpoint))
	case errors.Is(err, providers.ErrPermission):
		return "a path refused access (the error names it): fix its permissions, " + again
	case errors.Is(err, providers.ErrUnsupported):
		return "the provider " + op.Provider + " cannot do what the recovery needs (the error says what): make it able to (its configuration, its host's tools), " + again
	case errors.Is(err, providers.ErrInvalid), errors.Is(err, providers.ErrConflict):
		return "the provider " + op.Provider + " refused the request (the error says why): fix that, " + again
	}
	return "fix the cause named in the error, " + again
}
