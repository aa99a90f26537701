package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Lock objects of lifeboat processes killed on this host do not pile up:
// real captures are killed with SIGKILL while they hold their lock (after
// their first, second, ... save), and each next command that locks removes
// the lock objects they left (issue 31, item 14c). That locks of other
// hosts stay is TestLockRemovesDeadHere in repo.
func TestKilledProcessesLocksRemovedByNextCommand(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	work := filepath.Join(e.dir, "work")
	for i, name := range []string{"a", "b/c", "b/d/e"} {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(name, 1000*(i+1))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	locks := func() int {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(e.repo, "locks"))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	const kills = 3
	for n := 1; n <= kills; n++ {
		cmd := exec.Command(bin, "--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "capture", "--workspace", "work", work)
		cmd.Env = append(os.Environ(), crashEnv+"="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("capture killed after save %d: %v\n%s", n, err, out)
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("capture killed after save %d: not killed by SIGKILL: %v\n%s", n, err, out)
		}
		// The killed capture left its lock; the capture before it left one
		// too, which this one removed as it locked.
		if got := locks(); got != 1 {
			t.Fatalf("%d lock objects after %d killed captures, want only the last one's", got, n)
		}
	}
	e.ok("capture", "--workspace", "work", work)
	if got := locks(); got != 0 {
		t.Fatalf("%d lock objects left after the next capture", got)
	}
	e.ok("check", "--read-data")
}
