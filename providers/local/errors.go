package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// errnoKinds is the adapter's one mapping from operating-system failures to
// provider error kinds. Anything not listed is KindUnavailable: a local
// failure we do not understand is something to retry or look at, never a
// reason to treat a workspace as lost.
var errnoKinds = map[syscall.Errno]providers.Kind{
	syscall.ENOENT:       providers.KindUnavailable, // the root (or a parent) is gone
	syscall.ENOTDIR:      providers.KindUnavailable, // the root is not a directory
	syscall.EACCES:       providers.KindUnavailable, // unreadable root: an operator fixes permissions
	syscall.EPERM:        providers.KindUnavailable,
	syscall.EIO:          providers.KindUnavailable,
	syscall.ENOSPC:       providers.KindUnavailable,
	syscall.EDQUOT:       providers.KindUnavailable,
	syscall.EROFS:        providers.KindUnavailable,
	syscall.ESTALE:       providers.KindUnavailable,
	syscall.ENAMETOOLONG: providers.KindInvalid,
	syscall.ELOOP:        providers.KindInvalid, // a symlink where a directory was expected
	syscall.EEXIST:       providers.KindConflict,
	syscall.ENOTEMPTY:    providers.KindConflict,
	syscall.EBUSY:        providers.KindConflict,
}

// wrap turns any failure into a *providers.Error of this adapter. A
// failure at one entry of a copied tree (entryError) that is an access
// refusal is KindPermission, and an entry nothing can create
// (unsupportedEntry) KindUnsupported; both name the entry.
func wrap(op string, id providers.InstanceID, err error) error {
	if err == nil {
		return nil
	}
	var pe *providers.Error
	if errors.As(err, &pe) {
		return err
	}
	e := &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable, Err: err}
	var errno syscall.Errno
	var execErr *exec.Error
	var ue *unsupportedEntry
	var ee *entryError
	switch {
	case errors.As(err, &ue):
		e.Kind, e.Code = providers.KindUnsupported, fsmeta.TypeName(ue.Type)
		return e
	case errors.As(err, &ee) && isPermission(ee.Err):
		e.Kind = providers.KindPermission
		if errors.As(err, &errno) {
			e.Code = errnoName(errno)
		}
		return e
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e.Code = "context"
	case errors.As(err, &execErr):
		e.Kind, e.Code = providers.KindInvalid, "exec"
	case errors.As(err, &errno):
		e.Code = errnoName(errno)
		if k, ok := errnoKinds[errno]; ok {
			e.Kind = k
		}
	case errors.Is(err, fs.ErrNotExist):
		e.Code = "ENOENT"
	}
	return e
}

func errnoName(n syscall.Errno) string {
	names := map[syscall.Errno]string{
		syscall.ENOENT: "ENOENT", syscall.ENOTDIR: "ENOTDIR", syscall.EACCES: "EACCES",
		syscall.EPERM: "EPERM", syscall.EIO: "EIO", syscall.ENOSPC: "ENOSPC",
		syscall.EDQUOT: "EDQUOT", syscall.EROFS: "EROFS", syscall.ESTALE: "ESTALE",
		syscall.ENAMETOOLONG: "ENAMETOOLONG", syscall.ELOOP: "ELOOP", syscall.EEXIST: "EEXIST",
		syscall.ENOTEMPTY: "ENOTEMPTY", syscall.EBUSY: "EBUSY",
	}
	if s, ok := names[n]; ok {
		return s
	}
	return fmt.Sprintf("errno %d", int(n))
}

// invalid is a refusal of bad input (an instance id, a staging path).
func invalid(op string, id providers.InstanceID, format string, args ...any) error {
	return &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid, Err: fmt.Errorf(format, args...)}
}

// conflict is an operation the instance's current state does not allow.
func conflict(op string, id providers.InstanceID, format string, args ...any) error {
	return &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Err: fmt.Errorf(format, args...)}
}

// isPermission reports an access refusal: EACCES or EPERM.
func isPermission(err error) bool { return fsmeta.IsPermission(err) }

type (
	entryError       = fsmeta.EntryError
	unsupportedEntry = fsmeta.CannotCreate
)

func srcErr(names trees, verb, rel string, err error) error {
	return &entryError{Verb: verb, Rel: rel, Where: names.src, Err: err}
}

func dstErr(names trees, verb, rel string, err error) error {
	return &entryError{Verb: verb, Rel: rel, Where: names.dst, Dest: true, Err: err}
}
