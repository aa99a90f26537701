package fsmeta

import (
	"errors"
	"io/fs"
	"os"
)

// RemoveTree removes rel under r like RemoveAll, also when the tree holds
// read-only or unreadable directories, whose entries a non-root user
// cannot list or unlink: after a first attempt is refused it gives every
// directory in the tree (real directories only, never through a symlink,
// all inside r) its owner's read, write and search bits, then tries
// again. An absent rel is not an error.
func RemoveTree(r *os.Root, rel string) error {
	err := r.RemoveAll(rel)
	if err == nil || !IsPermission(err) {
		return err
	}
	sub, oerr := r.OpenRoot(rel)
	if oerr != nil {
		return err
	}
	// WalkDir visits a directory before reading it, so an unreadable one
	// is opened up before it is listed.
	_ = fs.WalkDir(sub.FS(), ".", func(p string, d fs.DirEntry, werr error) error {
		if werr == nil && d.IsDir() {
			if info, ierr := d.Info(); ierr == nil && info.Mode().Perm()&0o700 != 0o700 {
				_ = sub.Chmod(p, info.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	sub.Close()
	if err := r.RemoveAll(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
