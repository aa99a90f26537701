package local

import (
	"errors"
	"io/fs"
	"os"
)

// removeTree removes rel under r like RemoveAll, also when the tree holds
// read-only directories, whose entries a non-root user cannot unlink:
// after a first attempt fails it gives every directory in the tree (real
// directories only, never through a symlink) its owner's write and search
// bits, then tries again. An absent rel is not an error.
func removeTree(r *os.Root, rel string) error {
	err := r.RemoveAll(rel)
	if err == nil || !isPermission(err) {
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
