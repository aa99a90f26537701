//go:build linux

package fsmeta

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
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
func Unsupported(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// read lists and reads, growing buffers when attributes grow between the
// size query and the read (ERANGE); an attribute removed since it was
// listed is skipped.
func read(keep func(string) bool, list func([]byte) (int, error), get func(string, []byte) (int, error)) ([]Xattr, error) {
	var names []byte
	for {
		n, err := list(nil)
		if err == nil && n > 0 {
			names = make([]byte, n)
			n, err = list(names)
		}
		if err == unix.ERANGE {
			continue
		}
		if Unsupported(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing extended attributes: %w", err)
		}
		names = names[:n]
		break
	}
	var out []Xattr
	for name := range strings.SplitSeq(string(names), "\x00") {
		if name == "" || !keep(name) {
			continue
		}
		var val []byte
		gone := false
		for {
			n, err := get(name, nil)
			if err == nil && n > 0 {
				val = make([]byte, n)
				n, err = get(name, val)
			}
			if err == unix.ERANGE {
				continue
			}
			if err == unix.ENODATA {
				gone = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading extended attribute %q: %w", name, err)
			}
			val = val[:n]
			break
		}
		if !gone {
			out = append(out, Xattr{Name: name, Value: val})
		}
	}
	slices.SortFunc(out, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
