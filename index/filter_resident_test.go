package index_test

import (
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// The filter's build lets go of the pages its scan touched
// (dropResident). It must not read bbolt's mapping outside a transaction:
// a write transaction of another caller (here the file cache's, as a
// capture's cache writer does beside its lookups) that grows the file
// remaps it, and the old address may be unmapped or reused by then. Under
// -race this test reports the unsynchronised read of the mapping.
func TestFilterBuildBesideRemap(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	mustApply(t, r, d, randObject(r, blob.Workspace, 4, 50))
	misses := make([]blob.ID, index.FilterAfterMisses)
	for i := range misses {
		misses[i] = randID(r)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// Grow the file through several doublings of bbolt's mapping.
		for i := range 256 {
			if err := putFillerRecords(d, i, 64); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for _, id := range misses {
		if _, ok, err := d.Lookup(blob.Workspace, blob.Data, id); ok || err != nil {
			t.Fatalf("random id found: %v, %v", ok, err)
		}
	}
	if !index.FilterBuilt(d) {
		t.Fatalf("no filter after %d misses", index.FilterAfterMisses)
	}
	wg.Wait()
}
