package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
)

// A capture through `lifeboat serve` of a workspace whose browser profile
// a live process holds stops at the profile, waits for the browser up to
// the quiesce timeout, and fails retryably, the last good checkpoint
// unchanged; once the browser is gone the next capture takes the profile
// into the sensitive tier.
func TestServeCaptureWaitsForRunningBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	s.start("LIFEBOAT_LIFECYCLE_QUIESCE_TIMEOUT=1s")
	work := s.addLocalWorkspace("bot1", 1)
	good := s.cliJSON("capture", "--workspace", "bot1")
	if good["outcome"] != "captured" {
		t.Fatalf("first capture: %v", good)
	}
	chrome := filepath.Join(work, "home", "chrome")
	must(t, os.MkdirAll(filepath.Dir(chrome), 0o700))
	must(t, localstorage.New(1).Write(context.Background(), chrome, fixture.Options{LockPID: os.Getpid()}))

	r := s.cli("capture", "--workspace", "bot1", "--json")
	if r.code != exitQuiesce || !strings.Contains(r.stderr+r.stdout, "browser running") {
		t.Fatalf("capture with the browser running: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if w := s.cliJSON("workspace", "show", "bot1"); w["last_good"].(map[string]any)["snapshot"] != good["snapshot"] {
		t.Fatalf("the last good checkpoint moved: %v", w["last_good"])
	}

	// The lock now names a process of another host: the browser is gone.
	must(t, os.Remove(filepath.Join(chrome, "SingletonLock")))
	must(t, os.Symlink("otherhost-1", filepath.Join(chrome, "SingletonLock")))
	rc := s.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" {
		t.Fatalf("capture once the browser is gone: %v", rc)
	}
	snaps := jsonLines(t, s.ok("snapshots", "--json", "--workspace", "bot1").stdout)
	if last := snaps[len(snaps)-1]; last["id"] != rc["snapshot"] || last["sensitive"] != true {
		t.Fatalf("the last snapshot %v, want %s with the profile's part", last, rc["snapshot"])
	}
	s.stop()
}
