package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestPruneBesideServeCaptures: `lifeboat prune` (two-phase, the default)
// runs while `lifeboat serve` captures, with --lock-wait 0: no capture
// holds a lock it waits for. The first prune condemns what forget left
// unused and deletes nothing; a second one, whose clock the test moves past
// the margin (LIFEBOAT_TEST_PRUNE_CLOCK_OFFSET), deletes it. Captures go on
// beside both; afterwards check --read-data is clean and the last capture
// restores exactly.
func TestPruneBesideServeCaptures(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	s := newSvcEnv(t, `
[retention]
keep_last = 1
`)
	s.start()
	work := s.addLocalWorkspace("bot1", 1)
	for i := range 3 {
		writeTree(t, work, uint64(40+i))
		if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
			t.Fatalf("capture %d: %v", i, rc)
		}
	}
	// Captures hold no lock; serve's holds and retention share a shared
	// lock for a few seconds.
	for _, l := range jsonLines(t, s.ok("unlock", "--list", "--json").stdout) {
		if l["mode"] != "shared" || !strings.HasPrefix(fmt.Sprint(l["command"]), "serve") {
			t.Fatalf("a lock other than serve's shared one while serve runs: %v", l)
		}
	}
	// Captures through serve, one after another, until told to stop.
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	captures := 0
	var captureErr error
	wg.Go(func() {
		for ctx.Err() == nil {
			out, err := exec.Command(s.bin, "--config", s.cfgPath, "--server", s.url, "--json", "capture", "--workspace", "bot1").CombinedOutput()
			if err != nil {
				captureErr = err
				t.Errorf("capture beside prune: %v\n%s", err, out)
				return
			}
			captures++
		}
	})
	prune := func(env ...string) map[string]any {
		t.Helper()
		cmd := exec.Command(s.bin, "--repo", s.repo, "--cache-dir", t.TempDir(), "--password-file", s.passwdFile,
			"--lock-wait", "0", "--json", "prune")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("prune beside serve's captures: %v\n%s", err, out)
		}
		var last map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["message_type"] == "prune" {
				last = m
			}
		}
		if last == nil {
			t.Fatalf("prune printed no summary:\n%s", out)
		}
		return last
	}
	first := prune()
	if first["packs_condemned"].(float64) == 0 || first["packs_deleted"].(float64) != 0 {
		t.Fatalf("first prune: %v; want packs condemned and none deleted", first)
	}
	second := prune(pruneClockEnv + "=25h")
	if second["packs_deleted"].(float64) == 0 || second["condemnations_removed"].(float64) == 0 {
		t.Fatalf("second prune, a margin later: %v; want the condemned packs deleted", second)
	}
	stop()
	wg.Wait()
	if captureErr != nil {
		return
	}
	if captures == 0 {
		t.Fatal("no capture ran beside the prunes")
	}
	t.Logf("%d captures beside two prunes", captures)
	s.ok("check", "--read-data")
	target := filepath.Join(t.TempDir(), "t")
	s.ok("restore", "--workspace", "bot1", "--target", target, "latest")
	if d, err := compareContent(work, target); err != nil || d != "" {
		t.Fatalf("latest differs from the workspace: %s %v", d, err)
	}
	s.stop()
}

// TestKillTwoPhasePrune kills a real two-phase `lifeboat prune` that
// deletes what an earlier prune condemned (its clock moved past the
// margin) after its Nth save, and after its Nth remove, for every N, each
// time from the same starting repository. After every crash the
// repository checks clean and every kept snapshot restores; running prune
// again twice (a margin later) leaves nothing ripe to delete, nothing
// unused that is not condemned, and no scratch directory in TMPDIR.
func TestKillTwoPhasePrune(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	bin := lifeboatBinary(t)
	e := newEnv(t)
	tmp := pruneTempDir(t)
	e.ok("init", "--kdf-memory-kib", "64", "--kdf-time", "1", "--pack-size", "1")
	_, versions, ids := e.history("w", 4)
	e.ok("forget", "--keep-last", "2")
	if st := jsonLines(t, e.ok("prune", "--json", "--max-unused", "0%").stdout); st[len(st)-1]["packs_condemned"].(float64) == 0 {
		t.Fatalf("the first prune condemned nothing: %v", st)
	}
	start := filepath.Join(e.dir, "start")
	copyRepo(t, e.repo, start)
	later := pruneClockEnv + "=25h"
	lifeboat := func(env []string, args ...string) ([]byte, error) {
		cmd := exec.Command(bin, append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	for _, env := range []string{crashEnv, crashRemoveEnv} {
		crashes := 0
		for n := 1; ; n++ {
			copyRepo(t, start, e.repo)
			out, err := lifeboat([]string{env + "=" + strconv.Itoa(n), later}, "prune", "--max-unused", "0%")
			if !killedByHook(t, fmt.Sprintf("%s=%d", env, n), out, err) {
				break // finished before the Nth operation: every point was crashed
			}
			crashes++
			e.ok("check", "--read-data")
			e.restoreID(ids[2], versions[2])
			e.restoreID(ids[3], versions[3])
			// Two finishing runs: the first deletes what is ripe, and may
			// find more unused (duplicates the killed run left, once its
			// own copies are indexed), which the second condemns.
			for range 2 {
				if out, err := lifeboat([]string{later}, "prune", "--max-unused", "0%"); err != nil {
					t.Fatalf("%s=%d: finishing prune: %v\n%s", env, n, err, out)
				}
			}
			if left := pruneScratch(t, tmp); len(left) != 0 {
				t.Fatalf("%s=%d: after the finishing runs, prune scratch directories left: %v", env, n, left)
			}
			out, err = lifeboat([]string{later}, "prune", "--dry-run", "--json", "--max-unused", "0%")
			if err != nil {
				t.Fatalf("%s=%d: %v\n%s", env, n, err, out)
			}
			plan := jsonLines(t, string(out))[0]
			if plan["delete_now"] != nil || plan["condemn"] != nil {
				t.Fatalf("%s=%d: after the finishing runs, still to delete or condemn: %v", env, n, plan)
			}
			e.ok("check", "--read-data")
			e.restoreID(ids[3], versions[3])
		}
		if crashes < 3 {
			t.Fatalf("%s: only %d crash points", env, crashes)
		}
		t.Logf("%s: crashed at %d points", env, crashes)
	}
}
