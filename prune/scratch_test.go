package prune

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// wantHeld fails unless the lock of the scratch directory dir is held
// (through another open file description, in this process or another).
func wantHeld(t *testing.T, dir string) {
	t.Helper()
	f, err := tryLockScratch(dir)
	if err == nil {
		_ = f.Close()
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("flock of the held lock of %s: %v, want EWOULDBLOCK", dir, err)
	}
}

// A prune removes the scratch directories that killed prunes left beside
// its own, and nothing else: not one whose lock is held (by a prune in
// this process or another), not its own, nothing through a symbolic
// link, not another user's, not what a prune did not make; one without a
// lock file only when it is old and holds only a prune's files.
func TestPlanRemovesStaleScratch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(nil)
	e.src.add("a", saveBlobs(t, r, 5, 10))
	tmp := t.TempDir()
	write := func(path string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(path string, files ...string) string {
		t.Helper()
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			write(filepath.Join(path, f))
		}
		return path
	}
	old := func(path string) string {
		t.Helper()
		ago := time.Now().Add(-2 * scratchUnlockedAge)
		if err := os.Chtimes(path, ago, ago); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// killed leaves what a killed prune leaves: its directory with a run
	// file, and a lock file nobody holds any more.
	killed := func() string {
		t.Helper()
		dir, lock, err := makeScratch(tmp)
		if err != nil || lock == nil {
			t.Fatalf("makeScratch: %v, lock %v", err, lock)
		}
		write(filepath.Join(dir, "live-1.run"))
		_ = lock.Close()
		return dir
	}
	killed() // the next prune removes it
	held := killed()
	hold, err := tryLockScratch(held)
	if err != nil {
		t.Fatalf("the lock of a directory nobody holds: %v", err)
	}
	// flock locks belong to an open file description: a second one in
	// this same process conflicts with the first.
	wantHeld(t, held)
	outside := mkdir(filepath.Join(t.TempDir(), "outside"), scratchLock, "keep")
	link := filepath.Join(tmp, scratchPrefix+"1")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	unrelated := mkdir(filepath.Join(tmp, "other"), scratchLock, "keep")
	plainFile := filepath.Join(tmp, scratchPrefix+"2")
	write(plainFile)
	old(mkdir(filepath.Join(tmp, scratchPrefix+"3"), treeSetFile, "live-9.run")) // removed too
	youngUnlocked := mkdir(filepath.Join(tmp, scratchPrefix+"4"), treeSetFile, "live-9.run")
	oldForeign := old(mkdir(filepath.Join(tmp, scratchPrefix+"5"), treeSetFile, "notes.txt"))
	// All that must stay, whatever the prunes do.
	kept := []string{held, link, unrelated, plainFile, youngUnlocked, oldForeign}
	if os.Getuid() == 0 {
		othersUser := killed()
		for _, p := range []string{othersUser, filepath.Join(othersUser, scratchLock), filepath.Join(othersUser, "live-1.run")} {
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		kept = append(kept, othersUser)
	}
	left := func(want ...string) {
		t.Helper()
		got, err := filepath.Glob(filepath.Join(tmp, "*"))
		if err != nil {
			t.Fatal(err)
		}
		if want = slices.Sorted(slices.Values(want)); !slices.Equal(got, want) {
			t.Fatalf("in the temp dir: %q, want %q", got, want)
		}
		for _, path := range []string{filepath.Join(outside, "keep"), filepath.Join(unrelated, "keep")} {
			if _, err := os.Lstat(path); err != nil {
				t.Fatal(err)
			}
		}
	}

	p, err := PlanPrune(t.Context(), r, e.src, Options{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	// A second prune while the first lives leaves the first's directory.
	p2, err := PlanPrune(t.Context(), r, e.src, Options{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	p2.Close()
	left(append(kept, p.dir)...)
	wantHeld(t, p.dir)
	p.Close()
	left(kept...)
	if err := p.lock.Close(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Close left the lock file open (closing it again: %v)", err)
	}

	// Once its holder is gone, the held directory goes with the next prune.
	_ = hold.Close()
	p, err = PlanPrune(t.Context(), r, e.src, Options{TempDir: tmp})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	left(slices.DeleteFunc(kept, func(d string) bool { return d == held })...)
}
