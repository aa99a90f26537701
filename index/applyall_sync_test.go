package index_test

import (
	"context"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// An ApplyAll that runs while a Sync is under way is not undone by it. A
// writer stores an object, then applies it, so the Sync's listing can
// predate an object the ApplyAll records: a Sync that compared the DB
// with that listing after the ApplyAll took the object for one a prune
// had removed, emptied the DB and rebuilt it without the object, whose
// blobs (no longer pending in the writer) were then in no index; and a
// reset that fell between the ApplyAll's transactions left the object
// marked applied with only its last entries, for good.
func TestApplyAllDuringSync(t *testing.T) {
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	src.objs[randID(r)] = randObject(r, blob.Workspace, 3, 20)
	mustSync(t, d, src, index.SyncStats{Applied: 1})

	newID := randID(r)
	newObj := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{randPack(r, 2*index.ApplyBatch+10)}}
	applied := make(chan error, 1)
	waits := make(chan struct{})
	defer index.SetApplyWaits(func() { close(waits) })()
	src.onList = func() { // the Sync has listed: the writer stores and applies newObj
		src.onList = nil
		src.mu.Lock()
		src.objs[newID] = newObj
		src.mu.Unlock()
		go func() { applied <- d.ApplyAll([]index.Named{{ID: newID, Object: newObj}}) }()
		select {
		case <-waits: // kept out until the Sync is done
		case err := <-applied: // ran through
			applied <- err
		}
	}
	st, err := d.Sync(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-applied; err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 0 {
		t.Errorf("Sync dropped %d objects because of an object applied while it ran", st.Dropped)
	}
	want := locations(src.all()...)
	if n := len(dbContents(t, d)); n != len(want) {
		t.Fatalf("DB holds %d entries after a Sync and an ApplyAll side by side, want %d", n, len(want))
	}
	checkDB(t, d, want)
	for id, s := range objectStates(t, d) {
		if s != index.ObjectApplied {
			t.Errorf("object %s: state %d, want applied", id.Short(), s)
		}
	}
	mustSync(t, d, src, index.SyncStats{})
}
