package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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
		e.Kind, e.Code = providers.KindUnsupported, fsmeta.TypeName(ue.typ)
		return e
	case errors.As(err, &ee) && isPermission(ee.err):
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
func isPermission(err error) bool {
	return errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// entryError is a failure at one entry of a tree being copied. Its message
// names the entry (relative to its tree), the tree, and for an access
// refusal what to do.
type entryError struct {
	verb  string // "read", "create", "set the mode of", ...
	rel   string // the entry, relative to its tree
	where string // which tree
	dest  bool   // the tree being written
	err   error
}

func srcErr(names trees, verb, rel string, err error) error {
	return &entryError{verb: verb, rel: filepath.ToSlash(rel), where: names.src, err: err}
}

func dstErr(names trees, verb, rel string, err error) error {
	return &entryError{verb: verb, rel: filepath.ToSlash(rel), where: names.dst, dest: true, err: err}
}

func (e *entryError) Error() string {
	cause := e.err
	var pe *fs.PathError
	if errors.As(cause, &pe) {
		cause = pe.Err // the path is said already
	}
	var le *os.LinkError
	if errors.As(cause, &le) {
		cause = le.Err
	}
	s := fmt.Sprintf("cannot %s %s in %s: %v", e.verb, e.rel, e.where, cause)
	switch {
	case !isPermission(e.err):
	case e.dest:
		s += "; fix the permissions there (retrying will not help)"
	default:
		s += "; fix its permissions or remove it from the workspace (retrying will not help)"
	}
	return s
}

func (e *entryError) Unwrap() error { return e.err }

// pathOf is the path a walk error names, relative to the walked tree.
func pathOf(err error, rel string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path != "" && !filepath.IsAbs(pe.Path) {
		return pe.Path
	}
	return rel
}

// unsupportedEntry is an entry no copy can create: a socket or a device.
type unsupportedEntry struct {
	rel     string
	typ     fs.FileMode
	where   string
	written bool // found during the copy, not by the scan before it
}

func (e *unsupportedEntry) Error() string {
	done := "nothing was written"
	if e.written {
		done = "the partial copy was removed"
	}
	return fmt.Sprintf("%s %s in %s: provider %s cannot create %s; %s; remove it from the workspace or exclude it",
		fsmeta.TypeName(e.typ), filepath.ToSlash(e.rel), e.where, Name, fsmeta.Plural(e.typ), done)
}
