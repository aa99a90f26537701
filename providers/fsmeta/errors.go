package fsmeta

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// IsPermission reports an access refusal: EACCES, EPERM, or an SFTP
// permission denied (all match fs.ErrPermission).
func IsPermission(err error) bool { return errors.Is(err, fs.ErrPermission) }

// EntryError is a failure at one entry of a tree being copied or
// mirrored. Its message names the entry relative to its tree, the tree,
// and for an access refusal what to do; adapters turn one that
// IsPermission into providers.KindPermission.
type EntryError struct {
	Verb  string // "read", "create", "set the mode of", ...
	Rel   string // the entry, relative to its tree
	Where string // which tree: "the source tree /x", "instance ws-1 on host:22"
	Dest  bool   // the tree being written
	Err   error
}

func (e *EntryError) Error() string {
	cause := e.Err
	var pe *fs.PathError
	var le *os.LinkError
	if errors.As(cause, &pe) {
		cause = pe.Err // the path is said already
	} else if errors.As(cause, &le) {
		cause = le.Err
	}
	s := fmt.Sprintf("cannot %s %s in %s: %v", e.Verb, filepath.ToSlash(e.Rel), e.Where, cause)
	switch {
	case !IsPermission(e.Err):
	case e.Dest:
		s += "; fix the permissions there (retrying will not help)"
	default:
		s += "; fix its permissions or remove it from the workspace (retrying will not help)"
	}
	return s
}

func (e *EntryError) Unwrap() error { return e.Err }

// CannotCreate is an entry of a source tree an adapter cannot create: a
// socket or a device anywhere, a fifo where the adapter has no way to
// make one. Adapters turn it into providers.KindUnsupported.
type CannotCreate struct {
	Provider string
	Rel      string
	Type     fs.FileMode
	Where    string // which tree
	Why      string // optional: why this adapter cannot ("the host has no GNU tar")
	Written  bool   // found during the copy (the partial copy was removed), not before it
}

func (e *CannotCreate) Error() string {
	done := "nothing was written"
	if e.Written {
		done = "the partial copy was removed"
	}
	why := ""
	if e.Why != "" {
		why = " (" + e.Why + ")"
	}
	return fmt.Sprintf("%s %s in %s: provider %s cannot create %s%s; %s; remove it from the workspace or exclude it",
		TypeName(e.Type), filepath.ToSlash(e.Rel), e.Where, e.Provider, Plural(e.Type), why, done)
}
