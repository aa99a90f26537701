package bench

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Compare walks two trees and returns every difference: entries present on
// one side only, and differing type, permission bits (with setuid, setgid,
// sticky), owner, mtime (files and dirs), size, content or symlink target.
// ownership is compared only when both trees were written by root.
func Compare(want, got string) ([]string, error) { return CompareSkip(want, got, nil) }

// CompareSkip is Compare leaving out the paths (relative, with their
// subtrees) for which skip, if not nil, is true.
func CompareSkip(want, got string, skip func(rel string) bool) ([]string, error) {
	var diffs []string
	seen := map[string]bool{}
	skipped := func(rel string, d fs.DirEntry) (bool, error) {
		if skip == nil || rel == "." || !skip(rel) {
			return false, nil
		}
		if d.IsDir() {
			return true, filepath.SkipDir
		}
		return true, nil
	}
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		if out, err := skipped(rel, d); out {
			return err
		}
		seen[rel] = true
		if rel == "." {
			return nil
		}
		diffs = append(diffs, compareEntry(rel, p, filepath.Join(got, rel))...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(got, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(got, p)
		if out, err := skipped(rel, d); out {
			return err
		}
		if !seen[rel] {
			diffs = append(diffs, fmt.Sprintf("%s: only in %s", rel, got))
		}
		return nil
	})
	return diffs, err
}

func compareEntry(rel, a, b string) []string {
	ai, err := os.Lstat(a)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", rel, err)}
	}
	bi, err := os.Lstat(b)
	if err != nil {
		return []string{fmt.Sprintf("%s: missing: %v", rel, err)}
	}
	var d []string
	if ai.Mode() != bi.Mode() {
		d = append(d, fmt.Sprintf("%s: mode %v, want %v", rel, bi.Mode(), ai.Mode()))
	}
	as, bs := ai.Sys().(*syscall.Stat_t), bi.Sys().(*syscall.Stat_t)
	if os.Geteuid() == 0 && (as.Uid != bs.Uid || as.Gid != bs.Gid) {
		d = append(d, fmt.Sprintf("%s: owner %d:%d, want %d:%d", rel, bs.Uid, bs.Gid, as.Uid, as.Gid))
	}
	switch {
	case ai.Mode().IsRegular():
		if !ai.ModTime().Equal(bi.ModTime()) {
			d = append(d, fmt.Sprintf("%s: mtime %v, want %v", rel, bi.ModTime(), ai.ModTime()))
		}
		if ai.Size() != bi.Size() {
			d = append(d, fmt.Sprintf("%s: size %d, want %d", rel, bi.Size(), ai.Size()))
		} else if !sameContent(a, b) {
			d = append(d, fmt.Sprintf("%s: content differs", rel))
		}
	case ai.Mode()&fs.ModeSymlink != 0:
		at, _ := os.Readlink(a)
		bt, _ := os.Readlink(b)
		if at != bt {
			d = append(d, fmt.Sprintf("%s: link target %q, want %q", rel, bt, at))
		}
	case ai.IsDir():
		if !ai.ModTime().Equal(bi.ModTime()) {
			d = append(d, fmt.Sprintf("%s: dir mtime %v, want %v", rel, bi.ModTime(), ai.ModTime()))
		}
	}
	return d
}

// comparePool holds the read buffers of sameContent: a tree of 100,000
// files would otherwise allocate 2 MiB per file.
var comparePool = sync.Pool{New: func() any { return &[2][]byte{make([]byte, 1<<20), make([]byte, 1<<20)} }}

func sameContent(a, b string) bool {
	fa, err := os.Open(a)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return false
	}
	defer fb.Close()
	bufs := comparePool.Get().(*[2][]byte)
	defer comparePool.Put(bufs)
	ba, bb := bufs[0], bufs[1]
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return ea != nil && eb != nil
		}
	}
}

// CopyTree copies src to dst (which must not exist) with content, modes,
// mtimes and symlinks, so Compare(src, dst) finds nothing.
func CopyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				return err
			}
			if err := os.Chmod(to, info.Mode().Perm()|info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
				return err
			}
			return os.Chtimes(to, info.ModTime(), info.ModTime())
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Directory modes and times last, children before parents.
	var dirs []string
	_ = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		info, err := os.Stat(dirs[i])
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, dirs[i])
		to := filepath.Join(dst, rel)
		if err := os.Chmod(to, info.Mode().Perm()|info.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
			return err
		}
		if err := os.Chtimes(to, info.ModTime(), info.ModTime()); err != nil {
			return err
		}
	}
	return nil
}
