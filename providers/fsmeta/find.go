package fsmeta

import (
	"context"
	"errors"
	"io/fs"
)

var errFound = errors.New("found")

// ScanSource refuses a source tree holding something an adapter cannot
// create, before it writes anything: it walks fsys in lexical order by
// its directory entries alone (no stat where the filesystem reports entry
// types), and the first entry whose type bad accepts is a *CannotCreate
// of provider in where (the tree, for messages). An entry that cannot be
// listed is an *EntryError "read" naming it; nil when all is well.
func ScanSource(ctx context.Context, fsys fs.FS, provider, where string, bad func(fs.FileMode) bool) error {
	var found *CannotCreate
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if bad(d.Type()) {
			found = &CannotCreate{Provider: provider, Rel: p, Type: d.Type(), Where: where}
			return errFound
		}
		return nil
	})
	switch {
	case errors.Is(err, errFound):
		return found
	case err != nil:
		return &EntryError{Verb: "read", Rel: pathOf(err, "."), Where: where, Err: err}
	}
	return nil
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
