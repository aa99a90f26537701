package profile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"lifeboat/profile/fixture"
	"lifeboat/profile/profiletest"
)

// TestPrepareBusyIsRunning: a database whose write-ahead log
// cannot be checkpointed because another connection holds it (a browser
// this host cannot see as running: another PID namespace or host) is a
// running browser, exit 18, not a problem after which the capture goes
// on without the WAL's committed rows.
func TestPrepareBusyIsRunning(t *testing.T) {
	ctx := context.Background()
	for _, hold := range []string{"BEGIN IMMEDIATE", "BEGIN; SELECT count(*) FROM moz_cookies"} {
		root := filepath.Join(t.TempDir(), "firefox")
		prof := filepath.Join(root, "abc.default-release")
		must(t, os.MkdirAll(prof, 0o700))
		must(t, os.WriteFile(filepath.Join(root, "profiles.ini"), []byte("[Profile0]\nPath=abc.default-release\n"), 0o600))
		must(t, os.WriteFile(filepath.Join(prof, "prefs.js"), []byte("// prefs\n"), 0o600))
		db := filepath.Join(prof, "cookies.sqlite")
		must(t, fixture.WriteDB(ctx, db, true, []string{"CREATE TABLE moz_cookies(name TEXT, value TEXT)"}))
		d, c, err := fixture.OpenDB(ctx, db, false)
		must(t, err)
		_, err = c.ExecContext(ctx, "PRAGMA wal_autocheckpoint=0")
		must(t, err)
		_, err = c.ExecContext(ctx, "INSERT INTO moz_cookies VALUES('b', 'in-wal')")
		must(t, err)
		_, err = c.ExecContext(ctx, hold)
		must(t, err)
		probs, err := Prepare(ctx, &Profile{Dir: root, Rel: "ff", Kind: Firefox})
		var re *RunningError
		if !errors.Is(err, ErrBrowserRunning) || !errors.As(err, &re) {
			t.Errorf("%s held by another connection: Prepare returned %v, problems %v; want a running browser", hold, err, probs)
		}
		c.Close()
		d.Close()
	}
}

// TestPrepareLeavesQuietDatabasesClosed: a database whose -journal or
// -wal beside it is empty has nothing to roll back or fold in, so Prepare
// does not open it at all: no write, not even an open for writing (a
// server watching the workspace would take that as a change).
func TestPrepareLeavesQuietDatabasesClosed(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, testFixture(t), src, fixture.Options{})
	network := filepath.Join(src, fixture.Profile, "Network")
	cookies := filepath.Join(network, "Cookies")
	if !isSQLite(cookies) {
		t.Fatalf("the fixture's %s is not a SQLite database", cookies)
	}
	for _, side := range []string{"-journal", "-wal"} {
		_ = os.Remove(cookies + side)
		must(t, os.WriteFile(cookies+side, nil, 0o600))
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	must(t, err)
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, network, unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_DELETE); err != nil {
		t.Fatal(err)
	}
	probs, err := Prepare(ctx, &Profile{Dir: src, Rel: "chrome", Kind: Chromium})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Prepare: %v %v", probs, err)
	}
	var buf [4096]byte
	if n, err := unix.Read(fd, buf[:]); err != unix.EAGAIN {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		t.Fatalf("Prepare touched %s (read %d bytes of events, %v; the first's mask %#x)", network, n, err, ev.Mask)
	}
}

// TestPrepareHeldQuietDatabaseIsRunning: a database whose -journal or
// -wal is empty, held by another connection (as a browser of another host
// or PID namespace holds its databases: in exclusive locking mode, or in a
// read transaction), is a running browser: Prepare does not open it, but
// finds SQLite's lock on the database or, in WAL mode, on its -shm.
func TestPrepareHeldQuietDatabaseIsRunning(t *testing.T) {
	ctx := context.Background()
	newProfile := func(t *testing.T) (root, db string) {
		root = filepath.Join(t.TempDir(), "firefox")
		prof := filepath.Join(root, "abc.default-release")
		must(t, os.MkdirAll(prof, 0o700))
		must(t, os.WriteFile(filepath.Join(root, "profiles.ini"), []byte("[Profile0]\nPath=abc.default-release\n"), 0o600))
		must(t, os.WriteFile(filepath.Join(prof, "prefs.js"), []byte("// prefs\n"), 0o600))
		return root, filepath.Join(prof, "cookies.sqlite")
	}
	running := func(t *testing.T, root, side string) {
		t.Helper()
		if fi, err := os.Stat(side); err != nil || fi.Size() != 0 {
			t.Fatalf("%s: %v %v, want an empty side file", side, fi, err)
		}
		probs, err := Prepare(ctx, &Profile{Dir: root, Rel: "ff", Kind: Firefox})
		var re *RunningError
		if !errors.Is(err, ErrBrowserRunning) || !errors.As(err, &re) {
			t.Fatalf("Prepare returned %v, problems %v; want a running browser", err, probs)
		}
	}
	t.Run("exclusive, rollback journal", func(t *testing.T) {
		// Another process: closing any descriptor of a file drops the
		// closing process's own record locks on it.
		root, db := newProfile(t)
		startWriter(t, profiletest.Options{Held: db})
		running(t, root, db+"-journal")
	})
	t.Run("reading, write-ahead log", func(t *testing.T) {
		root, db := newProfile(t)
		must(t, fixture.WriteDB(ctx, db, true, []string{"CREATE TABLE moz_cookies(name TEXT, value TEXT)"}))
		d, conn, err := fixture.OpenDB(ctx, db, false)
		must(t, err)
		defer d.Close()
		defer conn.Close()
		for _, q := range []string{"PRAGMA wal_checkpoint(TRUNCATE)", "BEGIN", "SELECT count(*) FROM moz_cookies"} {
			_, err := conn.ExecContext(ctx, q)
			must(t, err)
		}
		running(t, root, db+"-wal")
	})
}
