package fsmeta

import (
	"io/fs"
	"path/filepath"
)

// Walk calls fn for every entry below dir (not dir itself), parents
// before children, with its path p, its name relative to dir in slash
// form, and its lstat information. fn may return filepath.SkipDir for a
// directory; any other error, or one reaching an entry, ends the walk.
func Walk(dir string, fn func(p, rel string, info fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(p, filepath.ToSlash(rel), info)
	})
}
