package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeCaptureAfterLostPack: a capture through `serve` whose pack
// cannot be stored (the repository's data/ directory replaced by a file)
// fails and is logged with its workspace, outcome and error. Once data/
// is back, the next capture through the same server, of the same files,
// succeeds: the server's repository is not left broken, and the capture
// stores again what the failed one lost instead of reusing it. SIGTERM
// then stops the server with 0; check --read-data is clean and the
// capture restores exactly.
func TestServeCaptureAfterLostPack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, "")
	s.start()
	work := s.addLocalWorkspace("bot1", 1)
	if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
		t.Fatalf("first capture: %v", rc)
	}

	writeTree(t, work, 2)
	data := filepath.Join(s.repo, "data")
	must(t, os.Rename(data, data+".away"))
	must(t, os.WriteFile(data, nil, 0o600))
	failed := s.cli("--json", "capture", "--workspace", "bot1")
	if failed.code == 0 || !strings.Contains(failed.stdout+failed.stderr, `"outcome":"failed"`) {
		t.Fatalf("capture with data/ a file: exit %d\nstdout: %s\nstderr: %s", failed.code, failed.stdout, failed.stderr)
	}
	must(t, os.Remove(data))
	must(t, os.Rename(data+".away", data))

	for i := range 2 { // the files the failed capture lost, then nothing new
		if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
			t.Fatalf("capture %d after data/ is back, through the same server: %v\nserver: %s", i+1, rc, s.stderr)
		}
	}
	s.stop() // exits 0
	var logged bool
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, `msg="capture failed"`) && strings.Contains(line, "workspace=bot1") &&
			strings.Contains(line, "outcome=failed") && strings.Contains(line, "reason=manual") && strings.Contains(line, "data/") {
			logged = true
		}
	}
	if !logged {
		t.Fatalf("the failed capture was not logged:\n%s", s.stderr)
	}
	s.ok("check", "--read-data")
	target := filepath.Join(t.TempDir(), "t")
	s.ok("restore", "--workspace", "bot1", "--target", target, "latest")
	if d, err := compareContent(work, target); err != nil || d != "" {
		t.Fatalf("latest differs from the workspace: %s %v", d, err)
	}
}
