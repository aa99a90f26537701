package index

import (
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/pack"
)

// bbolt panics on damaged pages (openBolt and openDBFile
// recover such panics, and the daemon's flights recover a capture's). A
// bbolt write transaction rolls back when its function panics, so the DB
// stays usable; apply's batch must then not leave d.filterMu held, or
// every later Apply and filter build of the process blocks for ever.
// Here the damage is a missing blobs bucket.
func TestApplyPanicReleasesFilterLock(t *testing.T) {
	d, err := OpenDB(t.TempDir(), blob.ID{1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketBlobs) }); err != nil {
		t.Fatal(err)
	}
	o := &Object{Tier: blob.Workspace, Packs: []PackInfo{{ID: blob.ID{2}, Size: 100,
		Entries: []pack.Entry{{Type: blob.Data, ID: blob.ID{3}, Length: 50, PlainLen: 10}}}}}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		_ = d.Apply(blob.ID{4}, o)
		return nil
	}()
	if panicked == nil {
		t.Fatal("Apply on a DB without its blobs bucket did not panic")
	}
	if !d.filterMu.TryLock() {
		t.Fatal("the filter's mutex is still held after apply's transaction panicked: later Applies and builds would block")
	}
	d.filterMu.Unlock()
}
