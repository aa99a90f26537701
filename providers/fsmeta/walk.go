package fsmeta

import (
	"context"
	"errors"
	"io/fs"
	"path"
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

// WalkSource calls fn for every entry of the source tree fsys, "." first
// and then in lexical order, with its lstat information, checking ctx
// before each. An entry that cannot be listed or stat'ed ends the walk
// with an *EntryError "read" naming it in where (the tree, for messages).
func WalkSource(ctx context.Context, fsys fs.FS, where string, fn func(rel string, info fs.FileInfo) error) error {
	return fs.WalkDir(fsys, ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return &EntryError{Verb: "read", Rel: pathOf(err, rel), Where: where, Err: err}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return &EntryError{Verb: "read", Rel: rel, Where: where, Err: err}
		}
		return fn(rel, info)
	})
}

// pathOf is the path a walk error names, relative to the walked tree;
// rel when it names none.
func pathOf(err error, rel string) string {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path != "" && !path.IsAbs(pe.Path) {
		return pe.Path
	}
	return rel
}
