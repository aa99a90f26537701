package repo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/index"
)

// queueObjects saves rounds of n small blobs, each round's in its own
// index object, saved and queued but not applied (their applications
// fail); it returns the blobs and their ids.
func queueObjects(t *testing.T, r *Repository, seed uint64, rounds, n int) ([][]byte, []blob.ID) {
	t.Helper()
	release := holdApplications(r)
	defer release()
	var data [][]byte
	var ids []blob.ID
	for i := range rounds {
		bs := make([][]byte, n) // small and distinct
		for j := range bs {
			bs[j] = fmt.Appendf(nil, "blob %d of round %d of %d", j, i, seed)
		}
		ids = append(ids, saveOnly(t, r, bs)...)
		data = append(data, bs...)
		r.uploadOpen()
		if err := r.writeIndex(context.Background(), blob.Workspace); !errors.Is(err, errHeld) {
			t.Fatalf("writeIndex with applications held = %v", err)
		}
	}
	if got := len(r.unapplied); got != rounds {
		t.Fatalf("%d index objects wait for the local index, want %d", got, rounds)
	}
	if got := inLocalIndex(t, r, ids); got != 0 {
		t.Fatalf("%d blobs in the local index before the application", got)
	}
	return data, ids
}

// lookupsUntil calls LookupBlobs for ids, then each (when set), over and
// over until done yields (must be nil), and once more after; it returns
// the number of rounds and of blobs LookupBlobs reported missing.
func lookupsUntil(t *testing.T, r *Repository, ids []blob.ID, done <-chan error, each func(call int)) (calls, misses int) {
	t.Helper()
	for finished := false; !finished; calls++ {
		select {
		case err := <-done:
			must(t, err)
			finished = true // and look once more
		default:
		}
		err := r.LookupBlobs(blob.Workspace, blob.Data, ids, func(i int, _ index.Location, ok bool) error {
			if !ok {
				misses++
			}
			runtime.Gosched() // let the indexing go on mid-lookup
			return nil
		})
		must(t, err)
		if each != nil {
			each(calls)
		}
	}
	return calls, misses
}

// While several saved index objects are applied together, in more than
// one transaction, every one of their blobs stays found by LookupBlobs
// and LookupBlob, and known to SaveBlob (which must not store it again):
// a blob leaves the pending set only once its whole group is committed.
func TestLookupsWhileMergedApplication(t *testing.T) {
	_, r := openNewTestRepo(t)
	ctx := context.Background()
	data, ids := queueObjects(t, r, 1500, 3, 3000) // 9,000 entries: two transactions
	before := indexObjects(t, r)

	done := make(chan error, 1)
	go func() { done <- r.applyIndex() }()
	calls, misses := lookupsUntil(t, r, ids, done, func(call int) {
		k := call * 97 % len(ids)
		if _, ok, err := r.LookupBlob(blob.Workspace, blob.Data, ids[k]); err != nil || !ok {
			t.Fatalf("LookupBlob(%s) during the application = %v, %v", ids[k].Short(), ok, err)
		}
		if id, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, data[k]); err != nil || !known || id != ids[k] {
			t.Fatalf("SaveBlob of a saved blob during the application = %s, known %v, %v", id.Short(), known, err)
		}
	})
	if misses > 0 {
		t.Fatalf("in %d LookupBlobs calls during the application, %d times a blob was reported missing", calls, misses)
	}
	if n := inLocalIndex(t, r, ids); n != len(ids) {
		t.Fatalf("%d of %d blobs in the local index after the application", n, len(ids))
	}
	if n := len(r.pending); n != 0 {
		t.Errorf("%d blobs still pending", n)
	}
	must(t, r.Flush(ctx))
	if n := indexObjects(t, r); n != before {
		t.Errorf("%d index objects after the SaveBlobs and a Flush, want %d (nothing saved again)", n, before)
	}
}

// A process killed between saving index objects and applying them loses
// nothing: the objects are in the repository, and the next Open's Sync
// applies them.
func TestKilledBeforeApplication(t *testing.T) {
	tr, r := openNewTestRepo(t)
	_, ids := queueObjects(t, r, 1600, 2, 200)

	// Another process (its own cache, as when the shared one is held)
	// opens the repository while r has applied nothing.
	r2, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: t.TempDir()})
	must(t, err)
	defer func() { must(t, r2.Close(context.Background())) }()
	if n := inLocalIndex(t, r2, ids); n != len(ids) {
		t.Fatalf("the next Open's local index has %d of %d blobs of saved, unapplied index objects", n, len(ids))
	}
	n := 0
	must(t, r2.idx.ForEachObject(func(_ blob.ID, _ blob.Tier, s index.ObjectState) error {
		if s == index.ObjectApplied {
			n++
		}
		return nil
	}))
	if n != 2 {
		t.Errorf("the next Open applied %d index objects, want 2", n)
	}
}

// An index object queued for application and removed from the repository
// before it is applied (as by a prune that ignored this writer's lock) is
// recorded by the application; the next Sync finds it gone and drops its
// blobs from the local index, and a later save stores them again.
func TestQueuedObjectRemovedBeforeApplication(t *testing.T) {
	_, r := openNewTestRepo(t)
	ctx := context.Background()
	kept, _ := queueObjects(t, r, 1700, 1, 50)
	must(t, r.Flush(ctx))
	gone, goneIDs := queueObjects(t, r, 1800, 1, 50)
	goneObj := r.unapplied[0].ID
	must(t, r.be.Remove(ctx, backend.Handle{Type: backend.Index, Name: goneObj.String()}))
	must(t, r.Flush(ctx))
	if n := inLocalIndex(t, r, goneIDs); n != len(goneIDs) {
		t.Fatalf("the application recorded %d of %d blobs", n, len(goneIDs))
	}
	st, err := r.SyncIndex(ctx)
	must(t, err)
	if st.Dropped != 1 {
		t.Fatalf("Sync after an applied object went = %+v, want it dropped", st)
	}
	if n := inLocalIndex(t, r, goneIDs); n != 0 {
		t.Fatalf("%d blobs of the removed object still in the local index", n)
	}
	for _, b := range kept {
		if _, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, b); err != nil || !known {
			t.Fatalf("SaveBlob of a blob of the kept object = known %v, %v", known, err)
		}
	}
	for _, b := range gone {
		if _, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, b); err != nil || known {
			t.Fatalf("SaveBlob of a blob of the removed object = known %v, %v; want it stored again", known, err)
		}
	}
	must(t, r.Flush(ctx))
	if n := inLocalIndex(t, r, goneIDs); n != len(goneIDs) {
		t.Errorf("%d of %d blobs stored again are indexed", n, len(goneIDs))
	}
}
