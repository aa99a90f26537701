package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"lifeboat/internal/proctest"
)

// testHooksTag is the build tag that compiles the test hooks of crash.go
// in (crash_hooks.go); lifeboatBinary builds with it.
const testHooksTag = "lifeboat_testhooks"

// hookEnv sets every test hook to fire at its first chance.
var hookEnv = []string{crashEnv + "=1", crashRemoveEnv + "=1", recoveryStopEnv + "=before:creating"}

// A release build ignores the test hooks: with every hook set to fire at
// once, init, two captures, forget and prune (saves and removes) all run
// to the end, and the binary does not even hold the hooks' names. A
// capture by a build with the hooks is killed at its first save.
func TestReleaseBuildHasNoTestHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the lifeboat binary twice")
	}
	release := proctest.BuildLifeboat(t) // as it ships: without the test hooks
	hooked := lifeboatBinary(t)
	for _, bin := range []string{release, hooked} {
		data, err := os.ReadFile(bin)
		must(t, err)
		has := bytes.Contains(data, []byte(crashEnv)) || bytes.Contains(data, []byte(recoveryStopEnv))
		if want := bin == hooked; has != want {
			t.Fatalf("%s: holds the test hooks' names: %v, want %v", bin, has, want)
		}
	}

	e := newEnv(t)
	work := filepath.Join(e.dir, "work")
	lifeboat := func(bin string, args ...string) ([]byte, error) {
		full := append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile}, args...)
		cmd := exec.Command(bin, full...)
		cmd.Env = append(os.Environ(), hookEnv...)
		return cmd.CombinedOutput()
	}
	writeTree(t, work, 1)
	steps := [][]string{
		{"init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1"},
		{"capture", "--workspace", "w", work},
		nil, // new content
		{"capture", "--workspace", "w", work},
		{"forget", "--keep-last", "1"},
		{"prune", "--instant-delete", "--max-unused", "0%"},
	}
	for _, args := range steps {
		if args == nil {
			must(t, os.RemoveAll(work))
			writeTree(t, work, 2)
			continue
		}
		if out, err := lifeboat(release, args...); err != nil {
			t.Fatalf("release build, hooks set: lifeboat %v: %v\n%s", args, err, out)
		}
	}
	e.ok("check", "--read-data")

	// The control: the hooked build dies by SIGKILL at the first save of
	// a capture with new content.
	must(t, os.RemoveAll(work))
	writeTree(t, work, 3)
	out, err := lifeboat(hooked, "capture", "--workspace", "w", work)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("hooked build: capture with %s=1 was not killed: %v\n%s", crashEnv, err, out)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("hooked build: capture ended with %v, not SIGKILL\n%s", err, out)
	}
}
