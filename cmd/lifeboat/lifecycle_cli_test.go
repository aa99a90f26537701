package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lifeboat/recovery"
)

// lifecycleEnv adds a state directory and a local provider root.
func lifecycleEnv(t *testing.T) (*env, []string) {
	e := newEnv(t)
	t.Setenv("LIFEBOAT_STATE_DIR", "")
	t.Setenv("LIFEBOAT_LOCAL_ROOT", "")
	e.init()
	return e, []string{"--state-dir", filepath.Join(e.dir, "state"), "--local-root", filepath.Join(e.dir, "root")}
}

func (e *env) showWorkspace(flags []string, id string) recovery.Workspace {
	e.t.Helper()
	out := e.ok(append(flags, "workspace", "show", id, "--json")...).stdout
	var w recovery.Workspace
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		e.t.Fatalf("workspace show: %v\n%s", err, out)
	}
	return w
}

func TestLifecycleCommands(t *testing.T) {
	e, flags := lifecycleEnv(t)
	if r := e.run("workspace", "list"); r.code != exitUsage || !strings.Contains(r.stderr, "--state-dir") {
		t.Fatalf("without a state dir: %d %s", r.code, r.stderr)
	}
	if r := e.run(append(flags, "workspace", "add", "bot1")...); r.code != exitFailure || !strings.Contains(r.stderr, "unavailable") {
		t.Fatalf("add with no provider root: %d %s", r.code, r.stderr)
	}
	if err := os.Mkdir(filepath.Join(e.dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := e.run(append(flags, "workspace", "add", "bot1")...); r.code != exitUsage || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("add of a missing instance: %d %s", r.code, r.stderr)
	}
	writeTree(t, filepath.Join(e.dir, "root", "bot1"), 1)
	e.ok(append(flags, "workspace", "add", "bot1")...)
	if r := e.run(append(flags, "workspace", "add", "bot1")...); r.code != exitRefused {
		t.Fatalf("second add: %d %s", r.code, r.stderr)
	}
	// The id is checked first: an existing one is refused as such, also
	// when the instance named is gone.
	if r := e.run(append(flags, "workspace", "add", "bot1", "--instance", "gone")...); r.code != exitRefused || !strings.Contains(r.stderr, "already exists") {
		t.Fatalf("second add naming a missing instance: %d %s", r.code, r.stderr)
	}
	if r := e.run(append(flags, "workspace", "add", "../x")...); r.code != exitUsage {
		t.Fatalf("bad id: %d %s", r.code, r.stderr)
	}
	lines := jsonLines(t, e.ok(append(flags, "park", "bot1", "--json")...).stdout)
	if lines[0]["message_type"] != "capture_receipt" || lines[0]["outcome"] != "captured" || lines[0]["native"] == nil {
		t.Fatalf("park: %v", lines)
	}
	snap := lines[0]["snapshot"].(string)
	lines = jsonLines(t, e.ok(append(flags, "park", "bot1", "--json")...).stdout)
	if lines[0]["outcome"] != "throttled" || lines[0]["last_good"] != snap {
		t.Fatalf("second park: %v", lines)
	}
	lines = jsonLines(t, e.ok(append(flags, "capture", "--workspace", "bot1", "--json")...).stdout)
	if lines[0]["outcome"] != "captured" || lines[0]["reason"] != "manual" {
		t.Fatalf("capture --workspace: %v", lines)
	}
	w := e.showWorkspace(flags, "bot1")
	if w.LastGood == nil || w.LastGood.Snapshot != lines[0]["snapshot"] || w.Native == nil {
		t.Fatalf("show: %+v", w)
	}
	if r := e.run(append(flags, "park", "nope")...); r.code != exitUsage || !strings.Contains(r.stderr, "unknown workspace") {
		t.Fatalf("park of an unknown workspace: %d %s", r.code, r.stderr)
	}
	e.restoreAndCompare("bot1", filepath.Join(e.dir, "root", "bot1"))
}

// A real lifeboat capturing through the lifecycle is SIGKILLed after each
// of its saves in turn. Every time, the last good checkpoint stays where it
// was, the repository checks clean, and the next capture succeeds and
// records the interruption.
func TestLifecycleKillDuringCapture(t *testing.T) {
	bin := lifeboatBinary(t)
	e, flags := lifecycleEnv(t)
	work := filepath.Join(e.dir, "root", "bot1")
	writeTree(t, work, 1)
	e.ok(append(flags, "workspace", "add", "bot1")...)
	e.ok(append(flags, "park", "bot1")...)
	good := e.showWorkspace(flags, "bot1").LastGood.Snapshot
	crashes, marked := 0, 0
	for n := 1; ; n++ {
		writeTree(t, work, uint64(100+n)) // new content, so the capture has data to save
		args := append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile}, flags...)
		cmd := exec.Command(bin, append(args, "capture", "--workspace", "bot1")...)
		cmd.Env = append(os.Environ(), crashEnv+"="+strconv.Itoa(n))
		out, err := cmd.CombinedOutput()
		if !killedByHook(t, fmt.Sprintf("crash point %d", n), out, err) {
			break // finished before the nth save
		}
		crashes++
		w := e.showWorkspace(flags, "bot1")
		switch {
		case w.LastGood == nil:
			t.Fatalf("crash point %d: no last good checkpoint", n)
		case w.LastGood.Snapshot != good && w.InFlight != nil:
			t.Fatalf("crash point %d: last good checkpoint moved, but the capture is still marked in flight: %+v", n, w)
		case w.LastGood.Snapshot != good:
			// Killed after the promotion (the saves that follow it record
			// the new checkpoint's hold): the new checkpoint is complete.
			e.ok("check", "--read-data")
			e.restoreAndCompare("bot1", work)
			good = w.LastGood.Snapshot
		}
		if w.InFlight != nil {
			marked++
		}
		e.ok("check", "--read-data")
		// Recoverable: the next capture through the lifecycle succeeds and
		// records the interruption it found.
		before := len(w.Recovery)
		lines := jsonLines(t, e.ok(append(flags, "capture", "--workspace", "bot1", "--json")...).stdout)
		w2 := e.showWorkspace(flags, "bot1")
		if lines[0]["outcome"] != "captured" || w2.LastGood.Snapshot != lines[0]["snapshot"] || w2.InFlight != nil {
			t.Fatalf("crash point %d: capture after the crash: %v, %+v", n, lines, w2)
		}
		if w.InFlight != nil && (len(w2.Recovery) != before+1 || w2.Recovery[before].Outcome != recovery.Interrupted) {
			t.Fatalf("crash point %d: interruption not recorded: %+v", n, w2.Recovery)
		}
		good = w2.LastGood.Snapshot
		e.restoreAndCompare("bot1", work)
	}
	if crashes < 3 || marked == 0 {
		t.Fatalf("%d crash points, %d of them mid-capture; the test tree should need more saves", crashes, marked)
	}
	t.Logf("crashed at %d save points, %d with a capture in flight", crashes, marked)
}
