package recovery

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/recovery/dirwatch"
)

// watchedFingerprints returns fingerprints with a watcher, counting its
// walks into walks; the test is skipped where the temporary directory
// cannot be watched (no inotify, a file system outside the allow-list).
func watchedFingerprints(t *testing.T, walks *atomic.Int32) *fingerprints {
	t.Helper()
	w, err := dirwatch.New()
	if err != nil {
		t.Skipf("no inotify here: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	probe := w.Tree()
	defer probe.Close()
	probe.Mark()
	if _, err := fingerprint(make([]byte, 32), t.TempDir(), probe); err != nil {
		t.Fatal(err)
	}
	if err := probe.Done(); err != nil {
		t.Skipf("the temporary directory cannot be watched: %v", err)
	}
	return &fingerprints{watch: w, log: slog.New(slog.DiscardHandler), by: map[string]*watchedFiles{},
		walked: func(string) { walks.Add(1) }}
}

// TestWatchedFingerprintIsAWalks: whatever changes in a workspace
// (every change the watches are documented to see), the fingerprint a
// server takes from its watches is the one a walk gives; one the watches
// vouch for costs no walk. A root that is missing, then made, and a root
// replaced by another directory through its parent are no exception.
func TestWatchedFingerprintIsAWalks(t *testing.T) {
	var walks atomic.Int32
	fps := watchedFingerprints(t, &walks)
	salt := bytes.Repeat([]byte{7}, 32)
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	check := func(what string) {
		t.Helper()
		before := walks.Load()
		got, listed, err := fps.of("ws", dir, salt, now)
		if err != nil {
			t.Fatal(err)
		}
		if listed != (walks.Load() > before) {
			t.Fatalf("after %s: of says listed %v, walks %d -> %d", what, listed, before, walks.Load())
		}
		want, err := fingerprint(salt, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("after %s: the watched fingerprint is not the walk's", what)
		}
	}
	check("a walk of a missing root")
	writeFiles(t, dir, map[string]string{"a.txt": "alpha", "src/b.go": "package b", "src/pkg/c.go": "package pkg", "empty/.keep": ""})
	check("the root made")
	now = now.Add(fingerprintRewalk) // a walk that watched nothing is not retried at once
	check("an hour later")
	n := walks.Load()
	check("nothing")
	if walks.Load() != n {
		t.Fatal("a fingerprint the watches vouch for cost a walk")
	}
	outside := filepath.Join(base, "outside")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(outside, 0o755))
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"a write", func() { writeFiles(t, dir, map[string]string{"src/pkg/c.go": "package pkg // more"}) }},
		{"a chmod", func() { must(os.Chmod(filepath.Join(dir, "a.txt"), 0o600)) }},
		{"a touch", func() {
			must(unix.UtimesNano(filepath.Join(dir, "src/b.go"), []unix.Timespec{{Sec: 5}, {Sec: 5}}))
		}},
		{"a file in a new directory", func() { writeFiles(t, dir, map[string]string{"new/deep/n.txt": "n"}) }},
		{"a directory renamed", func() { must(os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "newer"))) }},
		{"a directory moved out", func() { must(os.Rename(filepath.Join(dir, "newer"), filepath.Join(outside, "newer"))) }},
		{"a change in the directory moved out", func() { writeFiles(t, outside, map[string]string{"newer/deep/n.txt": "changed"}) }},
		{"a deletion", func() { must(os.Remove(filepath.Join(dir, "empty/.keep"))) }},
		{"a symlink", func() { must(os.Symlink("a.txt", filepath.Join(dir, "src/l"))) }},
		{"a second link, inside", func() { must(os.Link(filepath.Join(dir, "a.txt"), filepath.Join(dir, "a2.txt"))) }},
		{"a third link, outside", func() { must(os.Link(filepath.Join(dir, "a.txt"), filepath.Join(outside, "a3.txt"))) }},
		{"a write through the outside link", func() { writeFiles(t, outside, map[string]string{"a3.txt": "written outside"}) }},
		{"the root's mode", func() { must(os.Chmod(dir, 0o700)) }},
		{"the root replaced through its parent", func() {
			must(os.Rename(base, base+".old"))
			writeFiles(t, dir, map[string]string{"a.txt": "alpha"})
		}},
	} {
		c.change()
		check(c.name)
		n := walks.Load()
		check(c.name + ", again")
		if walks.Load() != n {
			t.Fatalf("after %s: the second fingerprint walked again", c.name)
		}
	}
}

// TestWatchesFollowTheWorkspaces: the watches of a workspace that is no
// longer in the store (removed here, or by another server sharing it) are
// removed at the next round.
func TestWatchesFollowTheWorkspaces(t *testing.T) {
	var walks atomic.Int32
	fps := watchedFingerprints(t, &walks)
	dir := filepath.Join(t.TempDir(), "ws")
	writeFiles(t, dir, map[string]string{"a/b.txt": "b", "c.txt": "c"})
	now := time.Now()
	for _, ws := range []string{"w1", "w2"} {
		if _, _, err := fps.of(ws, dir, make([]byte, 32), now); err != nil {
			t.Fatal(err)
		}
	}
	if n := fps.watch.Watches(); n != 2 {
		t.Fatalf("%d watches for the two directories two workspaces share, want 2", n)
	}
	fps.keep([]Workspace{{ID: "w2"}})
	if n := fps.watch.Watches(); n != 2 || len(fps.by) != 1 {
		t.Fatalf("%d watches, %d workspaces after w1 went; want 2 and 1", n, len(fps.by))
	}
	fps.keep(nil)
	if n := fps.watch.Watches(); n != 0 || len(fps.by) != 0 {
		t.Fatalf("%d watches, %d workspaces after every workspace went", n, len(fps.by))
	}
}

// TestWatchedRoundsWalkOnlyAfterAChange: with WatchFiles (serve), a
// periodic round over an unchanged workspace decides without walking its
// files; a change is captured at the next round; a change inotify may not
// report (a write through a shared mapping whose file stays open) is
// captured at the latest by the walk made once fingerprintRewalk has
// passed; a removed workspace's watches go. Without WatchFiles every round
// walks.
func TestWatchedRoundsWalkOnlyAfterAChange(t *testing.T) {
	ctx := context.Background()
	var walks atomic.Int32
	watchedFingerprints(t, &walks) // skips where nothing can be watched
	tick := func(t *testing.T, e *env, want Outcome, wantWalks int32) {
		t.Helper()
		prev := walks.Load()
		rs := e.l.Tick(ctx)
		if len(rs) != 1 || rs[0].Outcome != want {
			t.Fatalf("round: %+v, want outcome %s", rs, want)
		}
		if want == Unchanged && rs[0].Listed != (walks.Load() > prev) {
			t.Fatalf("unchanged round's receipt says listed %v; walks %d -> %d", rs[0].Listed, prev, walks.Load())
		}
		if got := walks.Load(); wantWalks >= 0 && got != wantWalks {
			t.Fatalf("%d fingerprint walks so far, want %d", got, wantWalks)
		}
	}

	t.Run("watched", func(t *testing.T) {
		walks.Store(0)
		e := newEnv(t, false, true, func(c *Config) { c.WatchFiles = true })
		e.l.fps.walked = func(string) { walks.Add(1) }
		dir := e.prov.dir("i1")
		tick(t, e, Captured, 1)
		tick(t, e, Unchanged, 1)
		tick(t, e, Unchanged, 1)
		writeFiles(t, dir, map[string]string{"sub/c.txt": "charlie"})
		tick(t, e, Captured, 2) // the round's walk; the capture reuses it
		tick(t, e, Unchanged, 2)

		f, err := os.OpenFile(filepath.Join(dir, "a.txt"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, 5, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		m[0] = 'A'
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			t.Fatal(err)
		}
		rs := e.l.Tick(ctx) // unchanged where, as on Linux today, no event comes
		if len(rs) != 1 || (rs[0].Outcome != Unchanged && rs[0].Outcome != Captured) {
			t.Fatalf("round after the write through a mapping: %+v", rs)
		}
		if rs[0].Outcome == Unchanged {
			e.clock.Advance(fingerprintRewalk)
			tick(t, e, Captured, -1)
		}
		n := walks.Load()
		tick(t, e, Unchanged, n)

		if e.l.fps.watch.Watches() == 0 {
			t.Fatal("no watches on a watched workspace")
		}
		if _, err := e.l.RemoveWorkspace(ctx, "ws1", false); err != nil {
			t.Fatal(err)
		}
		if n := e.l.fps.watch.Watches(); n != 0 {
			t.Fatalf("%d watches left after the workspace was removed", n)
		}
	})

	t.Run("unwatched", func(t *testing.T) {
		walks.Store(0)
		e := newEnv(t, false, true, nil)
		e.l.fps.walked = func(string) { walks.Add(1) }
		tick(t, e, Captured, 1)
		tick(t, e, Unchanged, 2)
		tick(t, e, Unchanged, 3)
	})
}
