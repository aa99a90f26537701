package livetest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// treeTime is every test file's mtime: whole seconds, which every
// provider's transfer keeps.
var treeTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// writeTree writes the test tree into dir: nested files with distinct
// content, an executable, a read-only and a private file, a symlink, an
// empty directory, and a hard link where the provider keeps them.
func writeTree(dir string, keep providers.FileSupport) error {
	files := []struct {
		rel  string
		mode fs.FileMode
		body string
	}{
		{"README.md", 0o644, "lifeboat provider test\n"},
		{"src/main.go", 0o644, "package main\n\nfunc main() {}\n"},
		{"src/deep/a/b/data.bin", 0o600, strings.Repeat("\x00\x01lifeboat\xff", 4096)},
		{"bin/run.sh", 0o755, "#!/bin/sh\necho run\n"},
		{"notes/read-only.txt", 0o444, "read only\n"},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(f.body), 0o600); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o750); err != nil {
		return err
	}
	if err := os.Symlink("src/main.go", filepath.Join(dir, "latest")); err != nil {
		return err
	}
	if keep.HardLinks {
		if err := os.Link(filepath.Join(dir, "README.md"), filepath.Join(dir, "notes", "README-link.md")); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
			return err
		}
		return os.Chtimes(p, treeTime, treeTime)
	})
}

// compareTrees says how got differs from want, leaving out the subtree
// skip: the same entries, types, permission bits, content, symlink
// targets, file mtimes to the second, the hard-link structure where
// keep says the provider keeps it, and no names linked in got that are
// separate files in want.
func compareTrees(want, got string, keep providers.FileSupport, skip string) error {
	type entry struct {
		mode   fs.FileMode
		body   []byte
		target string
		mtime  int64
		ino    uint64
	}
	describe := func(root string) (map[string]entry, error) {
		out := map[string]entry{}
		err := fsmeta.Walk(root, func(p, rel string, fi fs.FileInfo) (err error) {
			if rel == skip {
				return filepath.SkipDir
			}
			e := entry{mode: fi.Mode() & (fs.ModeType | fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
			switch {
			case fi.Mode().IsRegular():
				if e.body, err = os.ReadFile(p); err != nil {
					return err
				}
				e.mtime = fi.ModTime().Unix()
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					e.ino = st.Ino
				}
			case fi.Mode()&fs.ModeSymlink != 0:
				if e.target, err = os.Readlink(p); err != nil {
					return err
				}
				e.mode = fs.ModeSymlink
			}
			out[rel] = e
			return nil
		})
		return out, err
	}
	w, err := describe(want)
	if err != nil {
		return err
	}
	g, err := describe(got)
	if err != nil {
		return err
	}
	var diffs []string
	links := map[uint64][]string{}
	for rel, we := range w {
		ge, ok := g[rel]
		switch {
		case !ok:
			diffs = append(diffs, rel+": missing")
		case ge.mode != we.mode:
			diffs = append(diffs, fmt.Sprintf("%s: mode %v, want %v", rel, ge.mode, we.mode))
		case !bytes.Equal(ge.body, we.body):
			diffs = append(diffs, rel+": content differs")
		case ge.target != we.target:
			diffs = append(diffs, fmt.Sprintf("%s: link target %q, want %q", rel, ge.target, we.target))
		case ge.mtime != we.mtime:
			diffs = append(diffs, fmt.Sprintf("%s: mtime %s, want %s", rel, time.Unix(ge.mtime, 0).UTC(), time.Unix(we.mtime, 0).UTC()))
		}
		if we.ino != 0 {
			links[we.ino] = append(links[we.ino], rel)
		}
	}
	for rel := range g {
		if _, ok := w[rel]; !ok {
			diffs = append(diffs, rel+": not in the source")
		}
	}
	if keep.HardLinks {
		for _, names := range links {
			sort.Strings(names)
			for _, n := range names[1:] {
				if g[n].ino != g[names[0]].ino {
					diffs = append(diffs, fmt.Sprintf("%s and %s: one file in the source, two in the instance", names[0], n))
				}
			}
		}
	}
	gotLinks := map[uint64]string{}
	for rel, ge := range g {
		if ge.ino == 0 {
			continue
		}
		if first, ok := gotLinks[ge.ino]; ok && w[first].ino != w[rel].ino {
			a, b := min(first, rel), max(first, rel)
			diffs = append(diffs, fmt.Sprintf("%s and %s: two files in the source, one in the instance", a, b))
		}
		gotLinks[ge.ino] = rel
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("and %d more", len(diffs)-10))
		}
		return fmt.Errorf("differs from what was written: %s", strings.Join(diffs, "; "))
	}
	return nil
}
