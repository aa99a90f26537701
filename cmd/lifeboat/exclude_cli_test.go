package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A malformed --exclude glob is a usage error: exit 2, the message names
// the pattern, and nothing is captured.
func TestCaptureBadExcludeExitsUsage(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 1)
	r := e.run("capture", "--workspace", "w", "--exclude", "*.tmp", "--exclude", "[bad", src)
	if r.code != exitUsage || !strings.Contains(r.stderr, `bad exclude pattern "[bad"`) {
		t.Fatalf("exit %d, want %d naming the pattern\nstderr: %s", r.code, exitUsage, r.stderr)
	}
	r = e.run("capture", "--json", "--workspace", "w", "--exclude", "logs/[", src)
	lines := jsonLines(t, r.stderr)
	if r.code != exitUsage || len(lines) != 1 || lines[0]["message_type"] != "exit_error" || lines[0]["code"] != float64(exitUsage) {
		t.Fatalf("--json: exit %d, stderr %v", r.code, lines)
	}
	if snaps, err := os.ReadDir(filepath.Join(e.repo, "snapshots")); err != nil || len(snaps) != 0 {
		t.Fatalf("snapshots after refused captures: %v, %v", snaps, err)
	}
	e.ok("capture", "--workspace", "w", "--exclude", `\[x`, src)
}
