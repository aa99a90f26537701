package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
)

// writeRecoverableTree writes into work a workspace with what a faithful
// recovery keeps: writeTree's files (seed), a hard link across
// directories (d0/f0.txt and d1/f0-link.txt), a fifo (events.fifo), a
// symlink (latest), a setuid file (tool), a sticky directory (shared) and
// a browser profile fixture (chrome, seeded profileSeed), which it
// returns.
func writeRecoverableTree(t *testing.T, work string, seed, profileSeed uint64) *fixture.Fixture {
	t.Helper()
	writeTree(t, work, seed)
	must(t, os.Link(filepath.Join(work, "d0", "f0.txt"), filepath.Join(work, "d1", "f0-link.txt")))
	must(t, unix.Mkfifo(filepath.Join(work, "events.fifo"), 0o620))
	must(t, os.Symlink("d0/f0.txt", filepath.Join(work, "latest")))
	must(t, os.WriteFile(filepath.Join(work, "tool"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.Chmod(filepath.Join(work, "tool"), 0o755|os.ModeSetuid))
	must(t, os.Mkdir(filepath.Join(work, "shared"), 0o777))
	must(t, os.Chmod(filepath.Join(work, "shared"), 0o777|os.ModeSticky))
	fx := localstorage.New(profileSeed)
	must(t, fx.Write(context.Background(), filepath.Join(work, "chrome"), fixture.Options{}))
	return fx
}

// checkRecoveredTree fails t unless got holds the captured tree want
// (files, modes, mtimes, symlinks; the profile aside, as capture leaves
// its caches and locks out), d0/f0.txt and d1/f0-link.txt are still one
// file, events.fifo is a fifo and the browser session of fx is there.
func checkRecoveredTree(t *testing.T, want, got string, fx *fixture.Fixture) {
	t.Helper()
	d, err := bench.CompareSkip(want, got, func(rel string) bool { return rel == "chrome" })
	if err != nil || len(d) > 0 {
		t.Fatalf("the replacement differs from the captured tree: %v %v", d, err)
	}
	var a, b syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(got, "d0", "f0.txt"), &a))
	must(t, syscall.Stat(filepath.Join(got, "d1", "f0-link.txt"), &b))
	if a.Ino != b.Ino || a.Nlink != 2 {
		t.Fatalf("hard link split: inodes %d and %d, %d links", a.Ino, b.Ino, a.Nlink)
	}
	if fi, err := os.Lstat(filepath.Join(got, "events.fifo")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("fifo: %v %v", fi, err)
	}
	if err := fx.Check(context.Background(), filepath.Join(got, "chrome"), false); err != nil {
		t.Fatalf("browser session: %v", err)
	}
}
