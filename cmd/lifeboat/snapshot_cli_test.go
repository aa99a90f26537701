package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/demo"
	"lifeboat/profile/fixture"
	"lifeboat/recovery"
)

func TestCaptureRestoreCycle(t *testing.T) {
	e := newEnv(t)
	e.init()
	ws := filepath.Join(e.dir, "ws")
	must(t, bench.Generate(ws, 3, bench.Scale{SourceFiles: 40, DepFiles: 30, BinaryMiB: 2, LogKiB: 16}))

	first := jsonLines(t, e.ok("capture", "--workspace", "w1", "--instance", "sbx-1", "--json", ws).stdout)
	sum := last(first)
	if sum["message_type"] != "summary" || sum["complete"] != true {
		t.Fatalf("capture: %v", sum)
	}
	again := last(jsonLines(t, e.ok("capture", "--workspace", "w1", "--json", ws).stdout))
	if tot := again["totals"].(map[string]any); tot["new_bytes"] != float64(0) {
		t.Fatalf("unchanged capture stored new bytes: %v", tot)
	}
	must(t, os.WriteFile(filepath.Join(ws, "run.sh"), []byte("#!/bin/sh\necho changed\n"), 0o755))
	third := last(jsonLines(t, e.ok("capture", "--workspace", "w1", "--json", ws).stdout))

	snaps := jsonLines(t, e.ok("snapshots", "--workspace", "w1", "--json").stdout)
	if len(snaps) != 3 || snaps[0]["instance"] != "sbx-1" {
		t.Fatalf("snapshots: %v", snaps)
	}
	changes := jsonLines(t, e.ok("diff", sum["snapshot"].(string)[:8], third["snapshot"].(string)[:8], "--json").stdout)
	if len(changes) != 1 || changes[0]["path"] != "run.sh" || changes[0]["kind"] != "modified" {
		t.Fatalf("diff: %v", changes)
	}
	nodes := jsonLines(t, e.ok("ls", "latest", "--workspace", "w1", "src", "--json").stdout)
	if len(nodes) < 40 || !strings.HasPrefix(nodes[0]["path"].(string), "src") {
		t.Fatalf("ls src: %d nodes, first %v", len(nodes), nodes[0])
	}

	// Restore into a new directory, then over an existing one.
	target := filepath.Join(e.dir, "restored")
	e.ok("restore", "--workspace", "w1", "--target", target, "latest")
	if d, err := bench.Compare(ws, target); err != nil || len(d) > 0 {
		t.Fatalf("restored tree differs: %v %v", d, err)
	}
	old := filepath.Join(e.dir, "old")
	must(t, os.MkdirAll(old, 0o755))
	must(t, os.WriteFile(filepath.Join(old, "keep-me"), []byte("old tree"), 0o644))
	if r := e.run("restore", "--target", old, third["snapshot"].(string)); r.code == 0 {
		t.Fatal("restored over an existing target without --replace")
	}
	if b, err := os.ReadFile(filepath.Join(old, "keep-me")); err != nil || string(b) != "old tree" {
		t.Fatalf("refused restore touched the target: %q %v", b, err)
	}
	e.ok("restore", "--replace", "--target", old, third["snapshot"].(string))
	if d, err := bench.Compare(ws, old); err != nil || len(d) > 0 {
		t.Fatalf("replaced tree differs: %v %v", d, err)
	}
	e.ok("check", "--read-data")

	// Damage a data pack: check names the snapshots and files affected.
	packs, _ := filepath.Glob(filepath.Join(e.repo, "data", "*", "*"))
	var biggest string
	var size int64
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
	}
	must(t, os.Remove(biggest))
	r := e.run("check", "--json")
	if r.code != exitCorrupt {
		t.Fatalf("check after losing a pack: exit %d", r.code)
	}
	msg := jsonLines(t, r.stdout)[0]
	named := false
	for _, p := range msg["problems"].([]any) {
		pm := p.(map[string]any)
		named = named || (pm["kind"] == "file_damaged" && strings.Contains(pm["object"].(string), "snapshot "))
	}
	if !named {
		t.Fatalf("check did not name a damaged file: %v", msg["problems"])
	}
	// A restore that needs the lost pack fails and leaves the target alone.
	target2 := filepath.Join(e.dir, "restored2")
	if r := e.run("restore", "--workspace", "w1", "--target", target2, "latest"); r.code == 0 {
		t.Fatal("restore succeeded without its data")
	}
	if _, err := os.Stat(target2); !os.IsNotExist(err) {
		t.Fatalf("failed restore left %s behind: %v", target2, err)
	}
}

// TestDemo runs the first command of the README with --keep and checks
// its steps and what it left: the workspace on the replacement sandbox,
// its files as captured, the browser session and its unchanged id.
func TestDemo(t *testing.T) {
	e := newEnv(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	steps := jsonLines(t, e.ok("demo", "--json", "--keep").stdout)
	var names []string
	for _, s := range steps {
		if s["message_type"] != "demo_step" {
			t.Fatalf("message %v", s)
		}
		names = append(names, fmt.Sprint(s["step"]))
	}
	want := "init workspace capture change capture again lose detect offer approve restore verify"
	if strings.Join(names, " ") != want {
		t.Fatalf("demo steps %q, want %q", strings.Join(names, " "), want)
	}
	kept, err := filepath.Glob(filepath.Join(tmp, "lifeboat-demo-*"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept directories %v %v", kept, err)
	}
	st, err := recovery.OpenStore(filepath.Join(kept[0], demo.StateDir))
	must(t, err)
	defer st.Close()
	w, err := st.Workspace(demo.Workspace)
	must(t, err)
	ops, err := st.Operations(demo.Workspace)
	must(t, err)
	if len(ops) != 1 || ops[0].State != recovery.OpRecovered || ops[0].OldInstance == w.Instance || ops[0].Replacement != w.Instance || w.Generation != 1 {
		t.Fatalf("workspace %+v after operations %+v", w, ops)
	}
	for _, s := range steps[len(steps)-4:] { // offer, approve, restore and verify name what they did
		if !strings.Contains(fmt.Sprint(s["detail"]), short(w.LastGood.Snapshot)) && !strings.Contains(fmt.Sprint(s["detail"]), string(w.Instance)) {
			t.Fatalf("step %v names neither the checkpoint nor the replacement", s)
		}
	}
	sandbox := filepath.Join(kept[0], demo.SandboxesDir, string(w.Instance))
	d, err := bench.Compare(filepath.Join(kept[0], demo.ExpectedDir), filepath.Join(sandbox, "project"))
	if err != nil || len(d) > 0 {
		t.Fatalf("replacement differs from what was captured: %v %v", d, err)
	}
	must(t, fixture.New(demo.Seed).Check(context.Background(), filepath.Join(sandbox, filepath.FromSlash(bench.ProfileRel)), true))
}

func TestPartialExitCode(t *testing.T) {
	if got := exitCode(partialError{2}); got != exitPartial {
		t.Fatalf("partial capture exits %d, want %d", got, exitPartial)
	}
}

func last(ms []map[string]any) map[string]any {
	if len(ms) == 0 {
		return map[string]any{}
	}
	return ms[len(ms)-1]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A workspace with no snapshot (a typo) is said to have none by
// snapshots and forget, in text; under --json nothing more is printed.
func TestNoSnapshotsOfWorkspaceSaid(t *testing.T) {
	e := newEnv(t)
	e.init()
	e.captureTree("w1", "src", 1)
	if r := e.ok("snapshots", "--workspace", "w2"); r.stdout != "" || !strings.Contains(r.stderr, `no snapshots of workspace "w2" in this repository`) {
		t.Fatalf("snapshots of a workspace without any: %q %q", r.stdout, r.stderr)
	}
	if r := e.ok("snapshots", "--workspace", "w2", "--json"); r.stdout != "" || r.stderr != "" {
		t.Fatalf("snapshots --json of a workspace without any: %q %q", r.stdout, r.stderr)
	}
	if r := e.ok("forget", "--workspace", "w2", "--keep-last", "1"); !strings.Contains(r.stderr, `workspace "w2" has no snapshots in this repository`) {
		t.Fatalf("forget of a workspace without any: %q %q", r.stdout, r.stderr)
	}
}
