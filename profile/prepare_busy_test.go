package profile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
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
		must(t, writeDB(ctx, db, true, []string{"CREATE TABLE moz_cookies(name TEXT, value TEXT)"}))
		d, c, err := openDB(ctx, db, false)
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
