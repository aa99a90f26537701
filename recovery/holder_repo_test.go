package recovery

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/prune"
	"lifeboat/repo"
)

// RepoHolds writes a workspace's hold once per change: the same hold again
// (in this process, or in the next one reading what the last one wrote)
// writes nothing, and a new one replaces the old pin object.
func TestRepoHoldsWritesOnChange(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	a, b := hexID('a'), hexID('b')
	pinIDs := func() []string {
		t.Helper()
		p, err := prune.LoadPins(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range p.Objects {
			out = append(out, o.ID.String())
		}
		return out
	}
	h := &RepoHolds{Repo: r, Owner: "store-a"}
	hs := HoldSet{Workspace: "w", Snapshots: map[string]string{a: "last good", b: "being promoted"}}
	if err := h.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	first := pinIDs()
	if len(first) != 1 {
		t.Fatalf("pins after the first hold: %v", first)
	}
	if err := h.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if got := pinIDs(); len(got) != 1 || got[0] != first[0] {
		t.Fatalf("the same hold was written again: %v -> %v", first, got)
	}
	h2 := &RepoHolds{Repo: r, Owner: "store-a"} // the next server on the same store
	if err := h2.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	if got := pinIDs(); len(got) != 1 || got[0] != first[0] {
		t.Fatalf("the next process wrote the same hold again: %v -> %v", first, got)
	}
	if err := h2.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{b: "last good"}}); err != nil {
		t.Fatal(err)
	}
	got := pinIDs()
	if len(got) != 1 || got[0] == first[0] {
		t.Fatalf("a new hold did not replace the old pin: %v -> %v", first, got)
	}
	p, _ := prune.LoadPins(ctx, r)
	if _, held := p.Held("w", mustID(t, a)); held {
		t.Fatal("the released snapshot is still held")
	}
	if err := h2.Release(ctx, "w"); err != nil || len(pinIDs()) != 0 {
		t.Fatalf("release: %v, pins %v", err, pinIDs())
	}
}

// Two state stores using one workspace id on one repository keep each
// other's holds: each replaces and releases only its own pins, and a pin
// removed behind a holder's back is written again at its next hold.
func TestRepoHoldsOwners(t *testing.T) {
	ctx := context.Background()
	r := newTestRepo(t)
	a, b := &RepoHolds{Repo: r, Owner: "store-a"}, &RepoHolds{Repo: r, Owner: "store-b"}
	l, s2 := hexID('1'), hexID('2')
	if err := a.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{l: "last good of a"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{s2: "last good of b"}}); err != nil {
		t.Fatal(err)
	}
	held := func(id string) bool {
		t.Helper()
		p, err := prune.LoadPins(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := p.Held("w", mustID(t, id))
		return ok
	}
	if !held(l) || !held(s2) {
		t.Fatal("one store's hold undid the other's")
	}
	if err := b.Release(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if !held(l) || held(s2) {
		t.Fatal("a release removed another store's hold, or not its own")
	}
	// a's pin removed by hand (or by an older lifeboat): the same hold
	// again writes it back.
	if _, err := prune.RemovePins(ctx, r, "w"); err != nil {
		t.Fatal(err)
	}
	if err := a.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{l: "last good of a"}}); err != nil {
		t.Fatal(err)
	}
	if !held(l) {
		t.Fatal("a removed pin was not written again")
	}
	// Retain releases a's holds of workspaces its store no longer has.
	if err := a.Retain(ctx, func(string) bool { return false }); err != nil || held(l) {
		t.Fatalf("retain: %v, still held %t", err, held(l))
	}
}

func hexID(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

// A hold of nothing (a workspace not captured yet) writes no pin, and
// removes the pin an earlier hold of that workspace wrote.
func TestRepoHoldsNothingWritesNoPin(t *testing.T) {
	ctx := t.Context()
	r, _ := newTestRepoDir(t)
	h := &RepoHolds{Repo: r, Owner: "store-1"}
	if err := h.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if pins, err := prune.LoadPins(ctx, r); err != nil || len(pins.Objects) != 0 {
		t.Fatalf("pins after a hold of nothing: %+v %v, want none", pins.Objects, err)
	}
	if err := h.Hold(ctx, HoldSet{Workspace: "w", All: true, AllWhy: "lost"}); err != nil {
		t.Fatal(err)
	}
	if pins, err := prune.LoadPins(ctx, r); err != nil || len(pins.Objects) != 1 {
		t.Fatalf("pins after a hold of everything: %+v %v, want one", pins.Objects, err)
	}
	if err := h.Hold(ctx, HoldSet{Workspace: "w", Snapshots: map[string]string{}}); err != nil {
		t.Fatal(err)
	}
	if pins, err := prune.LoadPins(ctx, r); err != nil || len(pins.Objects) != 0 {
		t.Fatalf("pins after the hold went back to nothing: %+v %v, want none", pins.Objects, err)
	}
}

// Present asks storage, not the snapshot objects a server keeps loaded: a
// snapshot the capture's verification loaded, then another server's
// forget removed, is not present, so its promotion is refused.
func TestRepoHoldsPresentAsksStorage(t *testing.T) {
	ctx := context.Background()
	r, dir := newKeepingRepo(t)
	id, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, []byte(`{"a":"snapshot"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.LoadObject(ctx, crypt.KindSnapshot, id); err != nil { // kept from now on
		t.Fatal(err)
	}
	h := &RepoHolds{Repo: r, Owner: "store-a"}
	if err := h.Present(ctx, id.String()); err != nil {
		t.Fatalf("stored snapshot: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "snapshots", id.String())); err != nil { // another server's forget
		t.Fatal(err)
	}
	if err := h.Present(ctx, id.String()); err == nil {
		t.Fatal("a removed snapshot is present: its promotion would name a checkpoint that is gone")
	}
}

// newKeepingRepo is a repository opened as serve opens it, keeping the
// snapshot and pin objects it loads (repo.Options.KeepObjects), and its
// directory.
func newKeepingRepo(t *testing.T) (*repo.Repository, string) {
	t.Helper()
	s := storetest.Local(t)
	return repotest.New(t, repotest.Options{Store: s, Open: repo.Options{KeepObjects: true}}), s.Location
}

// A pin removed behind the back of a holder that keeps objects loaded is
// written again at the first hold after a Refresh (the server refreshes
// at every scheduled check), and a pin another server of the same store
// wrote is adopted: the same hold is not written twice.
func TestRepoHoldsRefresh(t *testing.T) {
	ctx := context.Background()
	r, dir := newKeepingRepo(t)
	hs := HoldSet{Workspace: "w", Snapshots: map[string]string{hexID('1'): "last good"}}
	a, b := &RepoHolds{Repo: r, Owner: "store-a"}, &RepoHolds{Repo: r, Owner: "store-a"}
	if err := a.Hold(ctx, hs); err != nil {
		t.Fatal(err)
	}
	pins := func() int {
		t.Helper()
		p, err := prune.LoadPins(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Objects)
	}
	if pins() != 1 { // loaded, and kept
		t.Fatal("the first hold wrote no pin")
	}
	ents, err := os.ReadDir(filepath.Join(dir, "pins"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("pins: %v %v", ents, err)
	}
	if err := os.Remove(filepath.Join(dir, "pins", ents[0].Name())); err != nil { // by hand
		t.Fatal(err)
	}
	if err := a.Hold(ctx, hs); err != nil || pins() != 0 {
		t.Fatalf("before a refresh, the holder takes its pin for written: %v, %d pins", err, pins())
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Hold(ctx, hs); err != nil || pins() != 1 {
		t.Fatalf("the hold after a refresh: %v, %d pins, want 1", err, pins())
	}
	if err := b.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Hold(ctx, hs); err != nil || pins() != 1 {
		t.Fatalf("another server's same hold: %v, %d pins, want the one a wrote", err, pins())
	}
	// Two pins holding the same (two servers each wrote one): both
	// servers, each knowing both, keep the same one, and write nothing.
	all, err := prune.LoadPins(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	twin := all.Objects[0]
	if _, err := prune.ReplacePin(ctx, r, twin, twin.Set.Add(time.Second), nil); err != nil || pins() != 2 {
		t.Fatalf("a second pin holding the same: %v, %d pins", err, pins())
	}
	for _, h := range []*RepoHolds{a, b} {
		if err := h.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := prune.LoadPins(ctx, r)
	for _, h := range []*RepoHolds{a, b, a} {
		if err := h.Hold(ctx, hs); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := prune.LoadPins(ctx, r)
	if len(after.Objects) != 1 || !slices.ContainsFunc(before.Objects, func(p prune.Pin) bool { return p.ID == after.Objects[0].ID }) {
		t.Fatalf("two servers' holds over two equal pins: %d pins after, want one of the two before", len(after.Objects))
	}
}
