package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"lifeboat/internal/storetest"
)

// A real lifeboat capture is killed with SIGKILL after each of its saves
// (packs, index objects, the snapshot) in turn. After every crash the repository checks clean (leftover packs
// are only notices), earlier data is intact, and the interrupted work can
// be redone.
func TestKillAtEverySave(t *testing.T) {
	bin := lifeboatBinary(t)
	storetest.Each(t, func(t *testing.T, s storetest.Store) { testKillAtEverySave(t, s, bin) })
}

func testKillAtEverySave(t *testing.T, s storetest.Store, bin string) {
	e := newEnvIn(t, s)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	base, work := filepath.Join(e.dir, "base"), filepath.Join(e.dir, "work")
	writeTree(t, base, 1)
	writeTree(t, work, 2)
	e.capture("base", base)
	crashes := 0
	for n := 1; ; n++ {
		cmd := exec.Command(bin, "--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile, "capture", "--workspace", "work", work)
		cmd.Env = append(os.Environ(), crashEnv+"="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		if !killedByHook(t, fmt.Sprintf("crash point %d", n), out, err) {
			break // finished before the nth save: every save point was crashed
		}
		crashes++
		e.ok("check", "--read-data")
		if nb := newBytes(e.capture("base", base, "--force")); nb != 0 {
			t.Fatalf("crash point %d: earlier data no longer all stored (%v new bytes)", n, nb)
		}
	}
	if crashes < 4 {
		t.Fatalf("only %d crash points; the test tree should need more saves", crashes)
	}
	e.ok("capture", "--workspace", "work", work)
	e.ok("check", "--read-data")
	t.Logf("crashed at %d save points", crashes)
}

// killedByHook reports whether a run of the binary with a crash hook set
// (what names it) was killed by SIGKILL at the hook, or finished: the
// hook's Nth operation never came. Any other end fails t.
func killedByHook(t *testing.T, what string, out []byte, err error) bool {
	t.Helper()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		return false
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s: not killed by SIGKILL: %v\n%s", what, err, out)
	}
	return true
}
