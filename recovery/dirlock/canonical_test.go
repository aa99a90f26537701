//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package dirlock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes base/a/b/c, base/l -> a/b/c (relative), base/abs -> base/a
// (absolute), base/file.
func tree(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		os.MkdirAll(filepath.Join(base, "a", "b", "c"), 0o700),
		os.Symlink(filepath.Join("a", "b", "c"), filepath.Join(base, "l")),
		os.Symlink(filepath.Join(base, "a"), filepath.Join(base, "abs")),
		os.WriteFile(filepath.Join(base, "file"), nil, 0o600),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return base
}

// Every spelling of one target has one canonical path, one lock file, and
// so one lock.
func TestSpellingsShareLock(t *testing.T) {
	base := tree(t)
	want := filepath.Join(base, "a", "b", "c", "ws")
	spellings := []string{
		want,
		base + "/l/ws",             // symlinked parent
		base + "/abs/b/c/ws",       // absolute symlink
		base + "/a/b/c/../c/ws",    // ..
		base + "/l/../c/ws",        // .. after a symlink: kernel meaning (lexically it would be base/c/ws)
		base + "//a/./b/c/ws/",     // doubled slash, ., trailing slash
		base + "/a/b/c/new/../ws",  // .. after a part that does not exist yet
		base + "/abs/../l/../c/ws", // both
		"l/ws", "./a/b/../b/c/ws",  // relative, from base
		"../" + filepath.Base(base) + "/l/ws",
	}
	t.Chdir(base)
	l, err := New(t.TempDir(), Options{Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, wantFile, err := l.LockFile(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range spellings {
		got, file, err := l.LockFile(s)
		if err != nil || got != want || file != wantFile {
			t.Fatalf("%s: canonical %q lock file %s (%v), want %q %s", s, got, file, err, want, wantFile)
		}
	}
	k := mustTry(t, l, spellings[1], "restore")
	defer k.Unlock()
	for _, s := range spellings {
		if _, err := l.TryLock(s, "switch"); err == nil {
			t.Fatalf("%s: locked although %s is held", s, spellings[1])
		} else {
			wantBusy(t, err, os.Getpid())
		}
	}
}

// The last component is kept as it is, symlink or not: the guarded
// operation replaces that entry.
func TestCanonicalKeepsLastComponent(t *testing.T) {
	base := tree(t)
	for in, want := range map[string]string{
		base + "/l":          base + "/l",
		base + "/abs":        base + "/abs",
		base + "/abs/b/c/..": base + "/a/b",
		base + "/l/.":        base + "/a/b/c", // "." after it: the link is a parent, so followed
		"/":                  "/",
		"/..":                "/",
	} {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Fatalf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestCanonicalErrors(t *testing.T) {
	base := tree(t)
	if err := os.Symlink("loop2", filepath.Join(base, "loop1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1", filepath.Join(base, "loop2")); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"":                   "empty target",
		base + "/a\x00b":     "NUL",
		base + "/file/ws":    "is not a directory",
		base + "/loop1/ws":   "symlinks at",
		base + "/file/x/y/z": "is not a directory",
	} {
		_, err := Canonical(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Canonical(%q): %v, want an error with %q", in, err, want)
		}
	}
}
