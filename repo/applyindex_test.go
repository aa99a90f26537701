package repo

import (
	"context"
	"errors"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/index"
)

// indexObjects counts the repository's index objects.
func indexObjects(t *testing.T, r *Repository) int {
	t.Helper()
	n := 0
	if err := r.be.List(context.Background(), backend.Index, func(backend.FileInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// inLocalIndex counts the ids the local index (not the pending set) has.
func inLocalIndex(t *testing.T, r *Repository, ids []blob.ID) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		_, ok, err := r.idx.Lookup(blob.Workspace, blob.Data, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			n++
		}
	}
	return n
}

// saveOnly saves blobs as workspace data blobs, without a Flush.
func saveOnly(t *testing.T, r *Repository, blobs [][]byte) []blob.ID {
	t.Helper()
	var ids []blob.ID
	for _, b := range blobs {
		id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// errHeld is the failure holdApplications gives the local index.
var errHeld = errors.New("application held by the test")

// holdApplications makes every application to r's local index fail with
// errHeld, as a failing disk would, until the returned function is
// called: index objects saved meanwhile wait in r.unapplied.
func holdApplications(r *Repository) (release func()) {
	r.indexMu.Lock()
	r.testApplyErr = func() error { return errHeld }
	r.indexMu.Unlock()
	return func() {
		r.indexMu.Lock()
		r.testApplyErr = nil
		r.indexMu.Unlock()
	}
}

// lookAll checks that LookupBlob finds every id.
func lookAll(t *testing.T, r *Repository, ids []blob.ID) {
	t.Helper()
	for _, id := range ids {
		if _, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id); err != nil || !ok {
			t.Fatalf("LookupBlob(%s) = %v, %v", id.Short(), ok, err)
		}
	}
}

// Index objects whose application failed wait, their blobs pending and
// found; the next application (the next index object saved, or a Flush)
// applies them with it, without saving them again. A failed application
// is reported by Flush.
func TestIndexObjectsAppliedTogether(t *testing.T) {
	ctx := context.Background()
	_, r := openNewTestRepo(t)

	// 30 blobs: an index object saved, its application failed.
	first := saveOnly(t, r, randomBlobs(t, 1, 30, 4<<10))
	r.uploadOpen()
	release := holdApplications(r)
	if err := r.writeIndex(ctx, blob.Workspace); !errors.Is(err, errHeld) || !strings.Contains(err.Error(), "updating the local index failed") {
		t.Fatalf("writeIndex with the local index failing = %v", err)
	}
	release()
	if n := indexObjects(t, r); n != 1 {
		t.Fatalf("%d index objects saved, want 1", n)
	}
	if n := inLocalIndex(t, r, first); n != 0 {
		t.Fatalf("%d of 30 blobs in the local index after a failed application, want 0", n)
	}
	lookAll(t, r, first)
	if n := len(r.pending); n != 30 {
		t.Fatalf("%d blobs pending, want 30", n)
	}

	// 30 more: their object is applied with the waiting one, as one.
	second := saveOnly(t, r, randomBlobs(t, 2, 30, 4<<10))
	r.uploadOpen()
	if err := r.writeIndex(ctx, blob.Workspace); err != nil {
		t.Fatal(err)
	}
	all := append(first, second...)
	if n := inLocalIndex(t, r, all); n != 60 {
		t.Fatalf("%d of 60 blobs in the local index, want all", n)
	}
	if n := len(r.pending); n != 0 {
		t.Fatalf("%d blobs still pending after the application", n)
	}
	states := map[blob.ID]index.ObjectState{}
	if err := r.idx.ForEachObject(func(id blob.ID, _ blob.Tier, s index.ObjectState) error { states[id] = s; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Fatalf("local index knows %d objects, want 2", len(states))
	}
	for id, s := range states {
		if s != index.ObjectApplied {
			t.Errorf("object %s: state %d, want applied", id.Short(), s)
		}
	}

	// The local index fails: Flush says so, the blobs stay found.
	third := saveOnly(t, r, randomBlobs(t, 3, 10, 4<<10))
	release = holdApplications(r)
	err := r.Flush(ctx)
	if !errors.Is(err, errHeld) || !strings.Contains(err.Error(), "updating the local index failed") {
		t.Fatalf("Flush with the local index failing = %v", err)
	}
	if n := inLocalIndex(t, r, third); n != 0 {
		t.Fatalf("%d blobs in the local index after a failed application", n)
	}
	lookAll(t, r, third)
	release()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := inLocalIndex(t, r, third); n != 10 {
		t.Fatalf("%d of 10 blobs in the local index after the retry", n)
	}
	if n := indexObjects(t, r); n != 3 {
		t.Errorf("%d index objects after the retry, want 3 (the retry applies, it does not save again)", n)
	}
	if n := len(r.pending); n != 0 {
		t.Errorf("%d blobs still pending", n)
	}
	lookAll(t, r, all)
}
