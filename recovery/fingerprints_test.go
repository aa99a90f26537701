package recovery

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWatchedRoundsWalkOnlyAfterAChange: with WatchFiles (serve), a
// periodic round over an unchanged workspace decides without walking its
// files; a change is captured at the next round; a change inotify cannot
// see (a write through a shared mapping whose file stays open) is found
// by the walk made once fingerprintRewalk has passed; a removed
// workspace's watches go. Without WatchFiles every round walks.
func TestWatchedRoundsWalkOnlyAfterAChange(t *testing.T) {
	ctx := context.Background()
	var walks atomic.Int32
	tick := func(t *testing.T, e *env, want Outcome, wantWalks int32) {
		t.Helper()
		rs := e.l.Tick(ctx)
		if len(rs) != 1 || rs[0].Outcome != want {
			t.Fatalf("round: %+v, want outcome %s", rs, want)
		}
		if got := walks.Load(); got != wantWalks {
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
		tick(t, e, Unchanged, 2) // no event: the watches cannot see it
		e.clock.Advance(fingerprintRewalk)
		tick(t, e, Captured, 3)
		tick(t, e, Unchanged, 3)

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
