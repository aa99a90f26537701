package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// key add and key passwd without --new-password-file and without a
// terminal say the new password is missing and how to give it; an
// unreadable or empty --new-password-file is named as that file.
func TestNewPasswordMessages(t *testing.T) {
	e := newEnv(t)
	e.init()
	empty := filepath.Join(e.dir, "empty")
	must(t, os.WriteFile(empty, nil, 0o600))
	for _, cmd := range []string{"add", "passwd"} {
		r := e.run("key", cmd)
		if r.code != exitUsage || !strings.Contains(r.stderr, "no new password given: pass --new-password-file") || strings.Contains(r.stderr, "LIFEBOAT_PASSWORD") {
			t.Errorf("key %s without a new password: exit %d: %s", cmd, r.code, r.stderr)
		}
		r = e.run("key", cmd, "--new-password-file", "nope")
		if r.code != exitUsage || !strings.Contains(r.stderr, "reading new-password file (--new-password-file): open nope") {
			t.Errorf("key %s --new-password-file nope: exit %d: %s", cmd, r.code, r.stderr)
		}
		r = e.run("key", cmd, "--new-password-file", empty)
		if r.code != exitUsage || !strings.Contains(r.stderr, "new-password file (--new-password-file) is empty: "+empty) {
			t.Errorf("key %s with an empty --new-password-file: exit %d: %s", cmd, r.code, r.stderr)
		}
	}
	e.passwdFile = "nope"
	if r := e.run("snapshots"); r.code != exitUsage || !strings.Contains(r.stderr, "reading password file: open nope") {
		t.Errorf("--password-file nope: exit %d: %s", r.code, r.stderr)
	}
}
