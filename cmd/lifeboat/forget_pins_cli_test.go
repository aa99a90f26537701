package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/checkpoint"
	"lifeboat/prune"
)

// pinSnapshot writes the pin the lifecycle writes for its last good
// checkpoint, as `lifeboat serve` in another process would.
func (e *env) pinSnapshot(ws, id string) {
	e.t.Helper()
	sid, err := blob.ParseID(id)
	if err != nil {
		e.t.Fatal(err)
	}
	r := e.openRepo()
	if _, err := prune.SetPin(context.Background(), r, prune.Pin{Workspace: ws,
		Snapshots: []prune.PinnedSnapshot{{ID: sid, Why: checkpoint.HeldLastGood}}}, time.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) unpin(ws string) {
	e.t.Helper()
	if _, err := prune.RemovePins(context.Background(), e.openRepo(), ws); err != nil {
		e.t.Fatal(err)
	}
}

func decisionLine(t *testing.T, lines []map[string]any, id string) map[string]any {
	t.Helper()
	for _, l := range lines {
		if l["message_type"] == "forget_snapshot" && l["id"] == id {
			return l
		}
	}
	t.Fatalf("no forget_snapshot for %s in %v", id, lines)
	return nil
}

// The data-loss bug: the lifecycle's last good checkpoint of w is S1; a
// newer snapshot S2 of w comes from another path; `forget --keep-last 1`
// protected only the newest complete snapshot, S2, and removed S1. With
// the lifecycle's pin in the repository, S1 stays (and restores); without
// it, S1 goes.
func TestForgetKeepsPinnedLastGoodCheckpoint(t *testing.T) {
	e := newEnv(t)
	e.init()
	dirA, dirB := filepath.Join(e.dir, "A"), filepath.Join(e.dir, "B")
	writeTree(t, dirA, 1)
	writeTree(t, dirB, 2)
	s1 := e.capture("w", dirA)["snapshot"].(string)
	e.pinSnapshot("w", s1) // the lifecycle promoted S1
	s2 := e.capture("w", dirB)["snapshot"].(string)

	lines := jsonLines(t, e.ok("forget", "--keep-last", "1", "--json").stdout)
	if d := decisionLine(t, lines, s1); d["keep"] != true || fmt.Sprint(d["reasons"]) != "[held: "+checkpoint.HeldLastGood+"]" {
		t.Fatalf("the last good checkpoint: %v", d)
	}
	if d := decisionLine(t, lines, s2); d["keep"] != true || fmt.Sprint(d["reasons"]) != "[last 1 last good root]" {
		t.Fatalf("the newest snapshot: %v", d)
	}
	if sum := lines[len(lines)-1]; sum["message_type"] != "forget" || sum["kept"].(float64) != 2 || sum["removed"].(float64) != 0 {
		t.Fatalf("summary %v", sum)
	}
	if out := e.ok("forget", "--keep-last", "1").stdout; !strings.Contains(out, "held: "+checkpoint.HeldLastGood) {
		t.Fatalf("text output lacks the hold: %s", out)
	}
	e.restoreID(s1, dirA)
	e.restoreID(s2, dirB)

	// Without the pin (what forget did before), S1 is removed.
	e.unpin("w")
	lines = jsonLines(t, e.ok("forget", "--keep-last", "1", "--dry-run", "--json").stdout)
	if d := decisionLine(t, lines, s1); d["keep"] != false || fmt.Sprint(d["reasons"]) != "[]" {
		t.Fatalf("unpinned, S1: %v", d)
	}
	e.ok("forget", "--keep-last", "1")
	if r := e.run("restore", "--target", filepath.Join(e.dir, "gone"), s1); r.code == 0 {
		t.Fatal("S1 still restores after an unpinned forget")
	}
	e.restoreID(s2, dirB)
}

// A pin that does not load stops forget, naming it, before it removes anything.
func TestForgetRefusesUnreadablePin(t *testing.T) {
	e := newEnv(t)
	e.init()
	_, _, ids := e.history("w", 2)
	r := e.openRepo()
	name := strings.Repeat("ab", 32)
	if err := r.Backend().Save(context.Background(), backend.Handle{Type: backend.Pin, Name: name}, []byte("damaged")); err != nil {
		t.Fatal(err)
	}
	res := e.run("forget", "--keep-last", "1")
	if res.code == 0 || !strings.Contains(res.stderr, "pins/"+name) {
		t.Fatalf("forget with an unreadable pin: exit %d\n%s", res.code, res.stderr)
	}
	for _, id := range ids {
		if !e.hasSnapshot(id) {
			t.Fatalf("snapshot %s removed", id)
		}
	}
}

// prune --forget-damaged never forgets a snapshot the lifecycle holds: it
// stops with exit 13 before deleting anything, saying what to do.
func TestPruneRefusesHeldDamagedSnapshot(t *testing.T) {
	e := newEnv(t)
	good, badID := e.captureGoodAndBad()
	e.pinSnapshot("bad", badID)
	e.removeRootTreePack(badID)
	packs := countFiles(t, filepath.Join(e.repo, "data"))
	indexes := countFiles(t, filepath.Join(e.repo, "index"))
	res := e.run("prune", "--instant-delete", "--forget-damaged")
	if res.code != exitCorrupt || !strings.Contains(res.stderr, badID) || !strings.Contains(res.stderr, "held: "+checkpoint.HeldLastGood) ||
		!strings.Contains(res.stderr, "capture the workspace again") || !strings.Contains(res.stderr, "older checkpoint") {
		t.Fatalf("prune --forget-damaged with a held damaged snapshot: exit %d\n%s", res.code, res.stderr)
	}
	if p, x := countFiles(t, filepath.Join(e.repo, "data")), countFiles(t, filepath.Join(e.repo, "index")); p != packs || x != indexes {
		t.Fatalf("prune deleted: packs %d -> %d, index objects %d -> %d", packs, p, indexes, x)
	}
	if !e.hasSnapshot(badID) {
		t.Fatal("the held damaged snapshot was forgotten")
	}
	if l, err := e.openRepo().ListLocks(t.Context()); err != nil || len(l) != 0 {
		t.Fatalf("locks left: %v %v", l, err)
	}
	// Once the lifecycle holds it no more, --forget-damaged forgets it.
	e.unpin("bad")
	e.ok("prune", "--instant-delete", "--forget-damaged")
	if e.hasSnapshot(badID) {
		t.Fatal("the damaged snapshot was not forgotten")
	}
	e.restoreAndCompare("good", good)
}

// hasSnapshot reports whether the snapshot object id is stored.
func (e *env) hasSnapshot(id string) bool {
	e.t.Helper()
	_, err := os.Stat(filepath.Join(e.repo, "snapshots", id))
	return err == nil
}

// countFiles counts the regular files under dir.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
