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

// Refusals say what to do next: restore onto an existing directory names
// --replace, init over a repository names --repo, and check
// --read-data-subset outside (0%, 100%] gives the range.
func TestRefusalsNameTheNextStep(t *testing.T) {
	e := newEnv(t)
	e.init()
	e.captureTree("w", "src", 1)
	target := filepath.Join(e.dir, "target")
	must(t, os.Mkdir(target, 0o700))
	if r := e.run("restore", "--workspace", "w", "--target", target, "latest"); r.code != exitFailure || !strings.Contains(r.stderr, "already exists: "+target) ||
		!strings.Contains(r.stderr, "run the restore again with --replace") {
		t.Errorf("restore onto an existing directory: exit %d: %s", r.code, r.stderr)
	}
	e.ok("restore", "--workspace", "w", "--target", target, "--replace", "latest")
	if r := e.run("init", "--kdf-memory-kib", "64", "--kdf-time", "1"); r.code != exitRefused || !strings.Contains(r.stderr, "choose another location with --repo") {
		t.Errorf("init over a repository: exit %d: %s", r.code, r.stderr)
	}
	for _, v := range []string{"0%", "-5%", "101%", "NaN%", "ten"} {
		if r := e.run("check", "--read-data-subset", v); r.code != exitUsage || !strings.Contains(r.stderr, "above 0% and at most 100%") {
			t.Errorf("check --read-data-subset %s: exit %d: %s", v, r.code, r.stderr)
		}
	}
	e.ok("check", "--read-data-subset", "100%")
}

// Counts in text output agree with their nouns: "1 snapshot", "tried 1
// key file", "1 file, 1 dir" (JSON output is unchanged).
func TestTextCountsAgree(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "src")
	must(t, os.Mkdir(src, 0o700))
	must(t, os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o600))
	e.capture("w", src)
	if r := e.ok("forget", "--workspace", "w", "--keep-last", "1"); !strings.Contains(r.stdout, "kept 1 snapshot, removed 0;") {
		t.Errorf("forget: %s", r.stdout)
	}
	if r := e.ok("check"); !strings.Contains(r.stdout, "checked 1 snapshot, ") {
		t.Errorf("check: %s", r.stdout)
	}
	if r := e.ok("restore", "--workspace", "w", "--target", filepath.Join(e.dir, "out"), "latest"); !strings.Contains(r.stdout, ": 1 file, 1 dir, ") {
		t.Errorf("restore: %s", r.stdout)
	}
	bad := filepath.Join(e.dir, "bad")
	must(t, os.WriteFile(bad, []byte("wrong"), 0o600))
	e.passwdFile = bad
	if r := e.run("snapshots"); r.code != exitWrongPass || !strings.Contains(r.stderr, "(tried 1 key file)") {
		t.Errorf("wrong password: exit %d: %s", r.code, r.stderr)
	}
	for n, want := range map[int]string{0: "0 errors", 1: "1 error", 2: "2 errors"} {
		if got := count(n, "error"); got != want {
			t.Errorf("count(%d, error) = %q, want %q", n, got, want)
		}
	}
}
