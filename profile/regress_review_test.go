package profile

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestRegressionPrepareBusyIsRunning: a database whose write-ahead log
// cannot be checkpointed because another connection holds it (a browser
// this host cannot see as running: another PID namespace or host) is a
// running browser, exit 18, not a problem after which the capture goes
// on without the WAL's committed rows.
func TestRegressionPrepareBusyIsRunning(t *testing.T) {
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
		probs, err := Prepare(ctx, Profile{Dir: root, Rel: "ff", Kind: Firefox})
		var re *RunningError
		if !errors.Is(err, ErrBrowserRunning) || !errors.As(err, &re) {
			t.Errorf("%s held by another connection: Prepare returned %v, problems %v; want a running browser", hold, err, probs)
		}
		c.Close()
		d.Close()
	}
}

// TestRegressionPausedBrowserAdvice: a paused (SIGSTOP) browser still
// holds its profile, and the detection sees its process alive, so the
// refusal must not advise pausing it: that retry could never succeed.
func TestRegressionPausedBrowserAdvice(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	must(t, cmd.Process.Signal(syscall.SIGSTOP))
	dir := filepath.Join(t.TempDir(), "chrome")
	writeFixture(t, testFixture(t), dir, FixtureOptions{LockPID: cmd.Process.Pid})
	err := CheckRunning(Profile{Dir: dir, Rel: "chrome", Kind: Chromium})
	if !errors.Is(err, ErrBrowserRunning) {
		t.Fatalf("a paused browser: %v", err)
	}
	if strings.Contains(err.Error(), "or pause the browser") || !strings.Contains(err.Error(), "quit the browser") {
		t.Fatalf("the refusal of a paused browser advises pausing it: %v", err)
	}
}
