package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Lock objects of lifeboat processes killed on this host do not pile up:
// real prunes are killed with SIGKILL while they hold their locks (after
// their first, second, ... save; captures take no lock), and each next
// command that locks removes the lock objects they left. That locks of
// other hosts stay is TestLockRemovesDeadHere in repo.
func TestKilledProcessesLocksRemovedByNextCommand(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	e.history("w", 4)
	e.ok("forget", "--keep-last", "2")
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
		cmd := exec.Command(bin, "--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "prune", "--instant-delete", "--max-unused", "0%")
		cmd.Env = append(os.Environ(), crashEnv+"="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("prune killed after save %d: %v\n%s", n, err, out)
		}
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("prune killed after save %d: not killed by SIGKILL: %v\n%s", n, err, out)
		}
		// The killed prune left its locks; the prune before it left some
		// too, which this one removed as it locked.
		if got := locks(); got == 0 {
			t.Fatalf("no lock objects after prune %d was killed", n)
		}
		for _, l := range jsonLines(t, e.ok("unlock", "--list", "--json").stdout) {
			// stale is omitted for a live lock.
			if stale, _ := l["stale"].(string); int(l["pid"].(float64)) != cmd.Process.Pid || stale == "" {
				t.Fatalf("after %d killed prunes, a lock not of the last one, or not stale: %v", n, l)
			}
		}
	}
	e.ok("prune", "--instant-delete", "--max-unused", "0%")
	if got := locks(); got != 0 {
		t.Fatalf("%d lock objects left after the next prune", got)
	}
	e.ok("check", "--read-data")
}
