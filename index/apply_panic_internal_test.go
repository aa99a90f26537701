package index

import (
	"context"
	"errors"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/pack"
)

// bbolt panics on damaged pages; a DB's transactions turn that into
// ErrCorrupt (damage.go). A bbolt write transaction rolls back when its
// function panics; apply's batch must then not leave d.filterMu held, or
// every later Apply and filter build of the process blocks for ever. The
// DB is marked damaged: its file is gone, so the next open starts over,
// and Sync fails with ErrCorrupt, so the repository reopens it. Here the
// damage is a missing blobs bucket.
func TestApplyPanicIsCorruptAndReleasesFilterLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := OpenDB(dir, blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketBlobs) }); err != nil {
		t.Fatal(err)
	}
	o := &Object{Tier: blob.Workspace, Packs: []PackInfo{{ID: blob.ID{2}, Size: 100,
		Entries: []pack.Entry{{Type: blob.Data, ID: blob.ID{3}, Length: 50, PlainLen: 10}}}}}
	if err := d.Apply(blob.ID{4}, o); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Apply on a DB without its blobs bucket = %v, want ErrCorrupt", err)
	}
	if !d.filterMu.TryLock() {
		t.Fatal("the filter's mutex is still held after apply's transaction panicked: later Applies and builds would block")
	}
	d.filterMu.Unlock()
	if _, err := os.Stat(d.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged file is still there: %v", err)
	}
	if _, err := d.Sync(context.Background(), oneSource{id: blob.ID{4}, o: o}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Sync of a damaged DB = %v, want ErrCorrupt", err)
	}
	d2, err := OpenDB(dir, blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if _, err := d2.Sync(context.Background(), oneSource{id: blob.ID{4}, o: o}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d2.Lookup(blob.Workspace, blob.Data, blob.ID{3}); !ok || err != nil {
		t.Fatalf("Lookup after the rebuild = %v, %v", ok, err)
	}
}
