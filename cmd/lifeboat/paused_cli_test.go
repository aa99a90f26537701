package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
	"lifeboat/profile/profiletest"
)

// pausedWorkspace writes a workspace with a Chromium fixture profile
// whose SingletonLock names a browser stand-in stopped in the middle of
// write transactions (profiletest), with a child process that is stopped
// too when stopChild is set and runs otherwise.
func pausedWorkspace(t *testing.T, dir string, stopChild bool) (src, chrome string, fx *fixture.Fixture, w *profiletest.Writer) {
	t.Helper()
	src = filepath.Join(dir, "ws")
	chrome = filepath.Join(src, "chrome")
	must(t, os.MkdirAll(src, 0o700))
	fx = localstorage.New(7)
	must(t, fx.Write(context.Background(), chrome, fixture.Options{WAL: true}))
	prof := filepath.Join(chrome, fixture.Profile)
	w, err := profiletest.StartWriter(profiletest.Options{WAL: filepath.Join(prof, "History"), Journal: filepath.Join(prof, "Top Sites"),
		Child: true, StopChild: stopChild})
	must(t, err)
	t.Cleanup(w.Kill)
	host, _ := os.Hostname()
	must(t, os.Remove(filepath.Join(chrome, "SingletonLock")))
	must(t, os.Symlink(host+"-"+strconv.Itoa(w.PID), filepath.Join(chrome, "SingletonLock")))
	return src, chrome, fx, w
}

// TestProfilePausedBrowser: `lifeboat capture` of a profile whose browser
// process tree is stopped mid-transaction succeeds, and `restore
// --profiles` gives back databases with exactly their committed rows
// (those only in the -wal too), sound and without side files.
func TestProfilePausedBrowser(t *testing.T) {
	e := newEnv(t)
	e.init()
	src, _, fx, w := pausedWorkspace(t, e.dir, true)
	if !w.Report.WALGrew || !w.Report.JournalHot {
		t.Fatalf("the writer's open transactions did not reach the files (%+v)", w.Report)
	}
	sum := last(jsonLines(t, e.ok("capture", "--json", "--workspace", "w", src).stdout))
	if p := sum["profiles"].([]any); len(p) != 1 {
		t.Fatalf("capture summary: %v", sum)
	}
	out := filepath.Join(e.dir, "out")
	r := e.ok("restore", "--profiles", "--target", out, sum["snapshot"].(string))
	if strings.Contains(r.stderr, "warning") {
		t.Fatalf("restore warned: %s", r.stderr)
	}
	prof := filepath.Join(out, "chrome", fixture.Profile)
	if err := profiletest.CheckRestored(context.Background(), filepath.Join(prof, "History"), filepath.Join(prof, "Top Sites")); err != nil {
		t.Fatal(err)
	}
	if err := fx.Check(context.Background(), filepath.Join(out, "chrome"), true); err != nil {
		t.Fatal(err)
	}
}

// TestProfilePausedParentRunningChild: a stopped browser whose child
// process runs is running: exit 18, with advice to pause the whole tree.
func TestProfilePausedParentRunningChild(t *testing.T) {
	e := newEnv(t)
	e.init()
	src, chrome, _, w := pausedWorkspace(t, e.dir, false)
	r := e.run("capture", "--workspace", "w", src)
	for _, want := range []string{"browser running", chrome, "descendant process " + strconv.Itoa(w.Report.ChildPID),
		"pause process " + strconv.Itoa(w.PID) + " and all its descendants"} {
		if r.code != exitBrowserRun || !strings.Contains(r.stderr, want) {
			t.Fatalf("capture with a running child of the browser: exit %d, stderr lacks %q: %s", r.code, want, r.stderr)
		}
	}
	if out := e.ok("snapshots", "--json").stdout; out != "" {
		t.Fatalf("a snapshot was saved: %s", out)
	}
}
