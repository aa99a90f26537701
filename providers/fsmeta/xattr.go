//go:build linux

package fsmeta

import (
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// User reports whether name is in the user namespace: the attributes a
// snapshot captures and restores, and the only ones Linux allows any
// owner to set (on regular files and directories only).
func User(name string) bool { return strings.HasPrefix(name, "user.") }

// All keeps every attribute the process can list.
func All(string) bool { return true }

// FdXattrs returns the attributes of the open file fd whose names keep
// accepts, sorted by name.
func FdXattrs(fd int, keep func(string) bool) ([]Xattr, error) {
	return read(keep,
		func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
		func(name string, b []byte) (int, error) { return unix.Fgetxattr(fd, name, b) })
}

// LXattrs returns the attributes of path itself (a symlink's own, never
// its target's) whose names keep accepts, sorted by name.
func LXattrs(path string, keep func(string) bool) ([]Xattr, error) {
	return read(keep,
		func(b []byte) (int, error) { return unix.Llistxattr(path, b) },
		func(name string, b []byte) (int, error) { return unix.Lgetxattr(path, name, b) })
}

// Unsupported reports whether err says the filesystem (or this kind of
// file) takes no extended attributes.
func Unsupported(err error) bool { return osutil.XattrsUnsupported(err) }

// read lists and reads the attributes keep accepts, sorted by name.
func read(keep func(string) bool, list func([]byte) (int, error), get func(string, []byte) (int, error)) ([]Xattr, error) {
	out, err := osutil.ReadXattrs(keep, list, get, func(name string, val []byte) Xattr { return Xattr{Name: name, Value: val} })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
