package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// ls, diff and export resolve `latest` and id prefixes as restore does: a
// damaged snapshot that may be the newest fails `latest` naming it (exit
// 13), a damaged one named by id fails with its damage, and --skip-damaged
// falls back, saying what it skipped (a warning on stderr; a
// skipped_snapshot line under --json).
func TestSnapshotRefStrictCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	older, newest := e.damagedNewest("b")
	dst := filepath.Join(e.dir, "dst")
	e.ok("--repo", dst, "init", "--kdf-memory-kib", "64", "--kdf-time", "1")
	export := []string{"export", "--to", dst, "--to-password-file", e.passwdFile, "--workspace", "w"}

	for _, args := range [][]string{
		{"ls", "--workspace", "w", "latest"},
		{"diff", "--workspace", "w", older[:8], "latest"},
		append(export, "latest"),
	} {
		res := e.run(args...)
		if res.code != exitCorrupt || !strings.Contains(res.stderr, newest[:8]) || !strings.Contains(res.stderr, "may be the newest") ||
			!strings.Contains(res.stderr, "--skip-damaged") || !strings.Contains(res.stderr, older[:8]) {
			t.Errorf("%v with the newest damaged: exit %d\nstdout: %s\nstderr: %s", args, res.code, res.stdout, res.stderr)
		}
		if res.stdout != "" {
			t.Errorf("%v printed results for a refused `latest`: %s", args, res.stdout)
		}
		// By id: its damage, not "no matching snapshot".
		byID := append(append([]string{}, args[:len(args)-1]...), newest[:8])
		res = e.run(byID...)
		if res.code != exitCorrupt || !strings.Contains(res.stderr, newest[:8]) || !strings.Contains(res.stderr, "cannot be read") ||
			strings.Contains(res.stderr, "no matching snapshot") {
			t.Errorf("%v (damaged, by id): exit %d\n%s", byID, res.code, res.stderr)
		}
		// --skip-damaged: the older one, named, with a warning per skipped.
		skip := append(append(append([]string{}, args[:1]...), "--skip-damaged"), args[1:]...)
		res = e.run(skip...)
		if res.code != 0 || !strings.Contains(res.stderr, "skipped snapshot "+newest[:8]) || !strings.Contains(res.stderr, "cannot be read") ||
			!strings.Contains(res.stderr, older[:8]) {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", skip, res.code, res.stdout, res.stderr)
		}
		res = e.run(append([]string{"--json"}, skip...)...)
		lines := jsonLines(t, res.stdout)
		if res.code != 0 || len(lines) == 0 || lines[0]["message_type"] != "skipped_snapshot" || lines[0]["id"] != newest ||
			lines[0]["used"] != older || !strings.Contains(lines[0]["error"].(string), newest[:8]) || res.stderr != "" {
			t.Errorf("--json %v: exit %d\nstdout: %s\nstderr: %s", skip, res.code, res.stdout, res.stderr)
		}
	}
	// snapshots lists the readable one and names the damaged one, also
	// under --json.
	res := e.ok("--json", "snapshots")
	lines := jsonLines(t, res.stdout)
	if len(lines) != 2 || lines[0]["message_type"] != "snapshot" || lines[0]["id"] != older ||
		lines[1]["message_type"] != "unreadable_snapshot" || lines[1]["id"] != newest || !strings.Contains(lines[1]["error"].(string), newest[:8]) {
		t.Errorf("snapshots --json with a damaged snapshot:\n%s", res.stdout)
	}
	if res := e.ok("snapshots"); !strings.Contains(res.stderr, "snapshot "+newest[:8]+" does not load") {
		t.Errorf("snapshots with a damaged snapshot:\n%s\n%s", res.stdout, res.stderr)
	}
	// What ls --skip-damaged listed is the older snapshot: a, not b.
	res = e.ok("ls", "--skip-damaged", "--workspace", "w", "latest")
	if !strings.Contains(res.stdout, " a\n") || strings.Contains(res.stdout, " b\n") {
		t.Fatalf("ls --skip-damaged latest listed:\n%s", res.stdout)
	}
	// The intact snapshot by id works everywhere without the flag.
	e.ok("ls", older[:8])
	e.ok("diff", older[:8], older)
	e.ok(append(export[:len(export)-2], older[:8])...)
}
