package fsmeta

import (
	"context"
	"errors"
	"io/fs"
)

var errFound = errors.New("found")

// Find walks fsys in lexical order by its directory entries alone (no stat
// where the filesystem reports entry types) and returns the first entry
// whose type bad accepts: how an adapter refuses a tree holding something
// it cannot create before it writes anything. rel is "" when there is
// none. A walk error (a directory that cannot be read) is returned as the
// walk gave it, a *fs.PathError naming the entry.
func Find(ctx context.Context, fsys fs.FS, bad func(fs.FileMode) bool) (rel string, typ fs.FileMode, err error) {
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if bad(d.Type()) {
			rel, typ = p, d.Type()
			return errFound
		}
		return nil
	})
	if errors.Is(err, errFound) {
		return rel, typ, nil
	}
	return "", 0, err
}

// Uncreatable accepts sockets and devices, which no adapter creates.
func Uncreatable(t fs.FileMode) bool {
	return t&(fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0
}

// TypeName names a file type for messages: "socket", "character device",
// "block device", "fifo", "symlink", "directory", "regular file" or
// "special file".
func TypeName(t fs.FileMode) string {
	switch {
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeCharDevice != 0:
		return "character device"
	case t&fs.ModeDevice != 0:
		return "block device"
	case t&fs.ModeNamedPipe != 0:
		return "fifo"
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t.IsDir():
		return "directory"
	case t.Type() == 0:
		return "regular file"
	}
	return "special file"
}

// Plural is TypeName for "cannot create ..." messages: "sockets",
// "character devices", "fifos".
func Plural(t fs.FileMode) string { return TypeName(t) + "s" }
