package checkpoint

import (
	"errors"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// A VerifiedTrees spares a later Verify the directories that passed
// before, and only while the index has lost no blob: after a pack leaves
// the index every directory is checked again, and one that changed is
// checked whatever the others did.
func TestVerifiedTreesSkipOnlyWhatPassed(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	r := tr.Repository
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a/b/f1": "first file", "a/c/f2": "second file", "g": "third file"})
	var vt VerifiedTrees
	capture := func(verify bool) blob.ID {
		t.Helper()
		res, err := Capture(ctx, r, root, Options{Workspace: "w", Verify: verify, Verified: &vt})
		if err != nil {
			t.Fatal(err)
		}
		return res.Manifest.ID
	}
	first := capture(true)

	// The packs of a/b/f1's chunks leave the index, as a prune drops
	// them: the snapshot no longer verifies, though it passed before.
	dropPackOf(t, r, first, "a/b/f1")
	if err := verify(ctx, r, first, &vt); err == nil || !strings.Contains(err.Error(), "is not in the index") {
		t.Fatalf("verify of a snapshot whose chunks left the index after it passed: %v", err)
	}

	// Captured again (the files are read again), it passes; then, with
	// no pack readable, it still passes through vt, which reads no tree,
	// where Verify alone fails.
	second := capture(true)
	writeFiles(t, root, map[string]string{"a/c/f2": "second file, changed"})
	changed := capture(false)
	unreadable := tr.fault.Add(fault.OnLoad).Match(backend.Pack).Always().Fail(nil)
	if err := verify(ctx, r, second, &vt); err != nil {
		t.Fatalf("verify of a snapshot that passed, through its VerifiedTrees: %v", err)
	}
	if n := unreadable.Fired(); n != 0 {
		t.Fatalf("verify of a snapshot that passed read %d packs", n)
	}
	if err := Verify(ctx, r, second); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("verify without VerifiedTrees, with no pack readable: %v", err)
	}
	// Its changed directories are read, and fail.
	if err := verify(ctx, r, changed, &vt); !errors.Is(err, fault.ErrInjected) || !strings.Contains(err.Error(), "tree ") {
		t.Fatalf("verify of a changed snapshot through VerifiedTrees, with no pack readable: %v", err)
	}
}

// A Verify that fails records nothing: the directories it reached are
// checked again by the next one.
func TestVerifiedTreesKeepNothingFromAFailure(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	r := tr.Repository
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"d/f": "a file"})
	res, err := Capture(ctx, r, root, Options{Workspace: "w"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Manifest.ID
	var vt VerifiedTrees
	tr.fault.Add(fault.OnLoad).Match(backend.Pack).Times(2).Fail(nil) // the root tree's pack, read in a run, then alone
	if err := verify(ctx, r, id, &vt); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("verify with the root tree unreadable: %v", err)
	}
	unreadable := tr.fault.Add(fault.OnLoad).Match(backend.Pack).Always().Fail(nil)
	if err := verify(ctx, r, id, &vt); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("verify after a failed one, with no pack readable: %v", err)
	}
	if unreadable.Fired() == 0 {
		t.Fatal("the verify after a failed one read no pack")
	}
}

// A blob that leaves the index while a verify skips directories on the
// removal generation's word has the snapshot verified again in full.
func TestVerifiedTreesCheckAgainWhenBlobsLeaveMeanwhile(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	r := tr.Repository
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"d/f": "a file"})
	var vt VerifiedTrees
	res, err := Capture(ctx, r, root, Options{Workspace: "w", Verify: true, Verified: &vt})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Manifest.ID
	verifyGenRead = func() { dropPackOf(t, r, id, "d/f") }
	defer func() { verifyGenRead = nil }()
	if err := verify(ctx, r, id, &vt); err == nil || !strings.Contains(err.Error(), "is not in the index") {
		t.Fatalf("verify during which the snapshot's chunks left the index: %v", err)
	}
}

// dropPackOf drops from r's index the pack of the first chunk of the file
// at slash path rel in snapshot id, as a prune does.
func dropPackOf(t *testing.T, r *repo.Repository, id blob.ID, rel string) {
	t.Helper()
	ctx := t.Context()
	m, err := snapshot.LoadManifest(ctx, r, id)
	if err != nil {
		t.Fatal(err)
	}
	var file *snapshot.Node
	err = snapshot.Walk(ctx, r, m.Root.Subtree, "", func(p string, n *snapshot.Node) error {
		if p == rel {
			file = n
		}
		return nil
	})
	if err != nil || file == nil || len(file.Content) == 0 {
		t.Fatalf("no %s in snapshot %s: %v", rel, id.Short(), err)
	}
	loc, ok, err := r.Index().Lookup(blob.Workspace, blob.Data, file.Content[0])
	if err != nil || !ok {
		t.Fatalf("%s's chunk is not indexed: %v", rel, err)
	}
	if err := r.Index().Drop(nil, map[blob.ID]bool{loc.Pack: true}); err != nil {
		t.Fatal(err)
	}
}
