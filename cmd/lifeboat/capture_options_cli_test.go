package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
)

// capture PATH --verify checks the snapshot it wrote and says so; without
// the flag it does not (the default is unchanged).
func TestCaptureVerifyFlag(t *testing.T) {
	e := newEnv(t)
	e.init()
	src := filepath.Join(e.dir, "ws")
	writeTree(t, src, 7)
	lines := jsonLines(t, e.ok("capture", "--json", "--workspace", "w", src).stdout)
	if sum := lines[len(lines)-1]; sum["message_type"] != "summary" || sum["verified"] != false {
		t.Fatalf("without --verify: %v", sum)
	}
	lines = jsonLines(t, e.ok("capture", "--json", "--verify", "--workspace", "w", src).stdout)
	if sum := lines[len(lines)-1]; sum["message_type"] != "summary" || sum["verified"] != true {
		t.Fatalf("with --verify: %v", sum)
	}
	if out := e.ok("capture", "--verify", "--workspace", "w", src).stdout; !strings.Contains(out, "verified:") {
		t.Fatalf("text output does not say it verified:\n%s", out)
	}
}

// capture --workspace ID (the lifecycle, without PATH) takes --profile
// directories, relative to the workspace's root, like capture PATH does:
// with discovery off, the named profile still goes into the sensitive
// tier; without naming it, it does not.
func TestLifecycleCaptureNamedProfile(t *testing.T) {
	e, flags := lifecycleEnv(t)
	inst := filepath.Join(e.dir, "root", "bot1")
	writeTree(t, filepath.Join(inst, "project"), 3)
	must(t, os.MkdirAll(filepath.Join(inst, "browser"), 0o755))
	must(t, localstorage.New(5).Write(context.Background(), filepath.Join(inst, "browser", "chrome"), fixture.Options{}))
	e.ok(append(flags, "workspace", "add", "bot1")...)
	sensitive := func(snap string) bool {
		t.Helper()
		for _, l := range jsonLines(t, e.ok("snapshots", "--json").stdout) {
			if l["id"] == snap {
				return l["sensitive"] == true
			}
		}
		t.Fatalf("snapshot %s not listed", snap)
		return false
	}
	lines := jsonLines(t, e.ok(append(flags, "capture", "--workspace", "bot1", "--no-profile-discovery", "--json")...).stdout)
	if lines[0]["outcome"] != "captured" || sensitive(lines[0]["snapshot"].(string)) {
		t.Fatalf("without --profile and discovery off: %v", lines[0])
	}
	writeTree(t, filepath.Join(inst, "project2"), 4) // something changed
	lines = jsonLines(t, e.ok(append(flags, "capture", "--workspace", "bot1", "--no-profile-discovery", "--profile", "browser/chrome", "--json")...).stdout)
	if lines[0]["outcome"] != "captured" || !sensitive(lines[0]["snapshot"].(string)) {
		t.Fatalf("with --profile browser/chrome: %v", lines[0])
	}
	r := e.run(append(flags, "capture", "--workspace", "bot1", "--profile", "project", "--json")...)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "project") {
		t.Fatalf("a --profile that is no profile: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// capture of a home directory that holds the repository and the cache
// (the defaults put both under $HOME) leaves the two out, completes, and
// says so in text and JSON; the restored tree has the rest and neither.
// Capturing the repository itself is refused with exit 2 before anything
// is written.
func TestCaptureLeavesOutRepositoryAndCache(t *testing.T) {
	e := newEnv(t)
	e.init()
	writeTree(t, filepath.Join(e.dir, "work"), 5)
	sum := e.capture("home", e.dir)
	if sum["complete"] != true {
		t.Fatalf("capture of a directory holding the repository: %v", sum)
	}
	var left []string
	for _, d := range sum["left_out"].([]any) {
		left = append(left, d.(map[string]any)["path"].(string)+" "+d.(map[string]any)["what"].(string))
	}
	if strings.Join(left, ", ") != "repo the repository, cache the cache directory" {
		t.Fatalf("left out: %v", left)
	}
	if out := e.ok("capture", "--workspace", "home", e.dir).stdout; !strings.Contains(out, `left out repo, the repository: it lies inside the captured directory`) {
		t.Fatalf("text output does not say what it left out:\n%s", out)
	}
	out := filepath.Join(t.TempDir(), "out")
	e.ok("restore", "--workspace", "home", "--target", out, "latest")
	for _, p := range []string{"repo", "cache"} {
		if _, err := os.Lstat(filepath.Join(out, p)); !os.IsNotExist(err) {
			t.Fatalf("the restored tree has %s: %v", p, err)
		}
	}
	if d, err := bench.Compare(filepath.Join(e.dir, "work"), filepath.Join(out, "work")); err != nil || len(d) > 0 {
		t.Fatalf("restored work differs: %v %v", d, err)
	}
	before := len(jsonLines(t, e.ok("snapshots", "--json").stdout))
	if r := e.run("capture", "--workspace", "repo", filepath.Join(e.repo, "data")); r.code != exitUsage || !strings.Contains(r.stderr, "is inside the repository") {
		t.Fatalf("capture inside the repository: exit %d: %s", r.code, r.stderr)
	}
	if after := len(jsonLines(t, e.ok("snapshots", "--json").stdout)); after != before {
		t.Fatalf("the refused capture wrote a snapshot: %d listed, were %d", after, before)
	}
}

// capture --workspace ID checks its --profile directories before the
// lifecycle does anything: a bad one exits 2 with no native checkpoint,
// no failure recorded and the workspace unchanged. An absolute --profile
// inside the workspace's root is taken as that directory; a relative one
// is said to be relative to the root.
func TestLifecycleCaptureBadProfileChangesNothing(t *testing.T) {
	e, flags := lifecycleEnv(t)
	inst := filepath.Join(e.dir, "root", "pbot")
	writeTree(t, filepath.Join(inst, "work"), 3)
	e.ok(append(flags, "workspace", "add", "pbot")...)
	for _, prof := range []string{"work/prof/Default", filepath.Join(inst, "work", "prof")} {
		r := e.run(append(flags, "capture", "--workspace", "pbot", "--profile", prof)...)
		out := r.stdout + r.stderr
		if r.code != exitUsage || strings.Contains(out, "native checkpoint") || strings.Contains(out, inst+inst) ||
			!strings.Contains(out, filepath.Join(inst, "work", "prof")) {
			t.Fatalf("--profile %s: exit %d\n%s", prof, r.code, out)
		}
		if !filepath.IsAbs(prof) && !strings.Contains(out, "relative to the workspace's root") {
			t.Fatalf("--profile %s: the message does not say what it is relative to:\n%s", prof, out)
		}
		if w := e.showWorkspace(flags, "pbot"); w.Failures != 0 || len(w.Recovery) != 0 || w.Native != nil || w.LastGood != nil || w.InFlight != nil {
			t.Fatalf("--profile %s changed the workspace: %+v", prof, w)
		}
	}
	if r := e.run(append(flags, "capture", "--workspace", "pbot", "--profile", e.dir)...); r.code != exitUsage || !strings.Contains(r.stderr, "not below the workspace") {
		t.Fatalf("--profile outside the root: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.ok(append(flags, "capture", "--workspace", "pbot")...)
}
