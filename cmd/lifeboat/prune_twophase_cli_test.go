package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	work := s.sandbox("bot1", 1)
	s.cliOK("workspace", "add", "bot1", "--provider", "local")
	for i := range 3 {
		writeTree(t, work, uint64(40+i))
		if rc := s.cliJSON("capture", "--workspace", "bot1"); rc["outcome"] != "captured" {
			t.Fatalf("capture %d: %v", i, rc)
		}
	}
	if locks := jsonLines(t, s.ok("unlock", "--list", "--json").stdout); len(locks) != 0 {
		t.Fatalf("locks left while serve runs: %v", locks)
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
	second := prune(pruneClockEnvForTest + "=25h")
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

// pruneClockEnvForTest is crash_hooks.go's pruneClockEnv (the hooks build
// only defines it).
const pruneClockEnvForTest = "LIFEBOAT_TEST_PRUNE_CLOCK_OFFSET"
