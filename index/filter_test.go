package index_test

import (
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// After enough missing lookups the DB answers misses from its filter, and
// never a lookup of a blob it holds: not of those applied before the
// filter was built, nor of those applied after, nor of those applied
// while lookups run. The filter also fills up and is built again, larger.
func TestLookupFilter(t *testing.T) {
	defer index.SetFilterMinRoom(5000)()
	r := seedtest.Rand(t)
	d := tempDB(t)
	var objs []*index.Object
	apply := func(o *index.Object) {
		t.Helper()
		mustApply(t, r, d, o)
		objs = append(objs, o)
	}
	apply(randObject(r, blob.Workspace, 10, 50))
	if index.FilterBuilt(d) {
		t.Fatal("filter built before any miss")
	}
	for range index.FilterAfterMisses {
		if _, ok, err := d.Lookup(blob.Workspace, blob.Data, randID(r)); ok || err != nil {
			t.Fatalf("random id found: %v, %v", ok, err)
		}
	}
	room := index.FilterRoom(d)
	if room == 0 {
		t.Fatalf("no filter after %d misses", index.FilterAfterMisses)
	}
	checkDB(t, d, locations(objs...))
	// Applies beside lookups of what is applied and of random ids; then
	// more than the filter's room (5,000 + twice the keys at its build),
	// so it is dropped and rebuilt.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		var id blob.ID
		untilClosed(stop, func(i int) bool {
			id[0], id[1], id[2] = byte(i), byte(i>>8), byte(i>>16)
			if _, ok, err := d.Lookup(blob.Sensitive, blob.Tree, id); ok || err != nil {
				t.Errorf("made-up id found: %v, %v", ok, err)
				return false
			}
			return true
		})
	})
	for range 12 {
		o := randObject(r, blob.Tiers[r.IntN(2)], 20, 60)
		apply(o)
		for _, p := range o.Packs {
			for _, e := range p.Entries {
				if _, ok, err := d.Lookup(o.Tier, e.Type, e.ID); !ok || err != nil {
					t.Fatalf("blob %s applied but not found (%v)", e.ID.Short(), err)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	checkDB(t, d, locations(objs...))
	// The first filter overflowed: the next one, built after more misses
	// if the lookups above did not build it already, is larger.
	for range index.FilterAfterMisses {
		if index.FilterRoom(d) > room {
			break
		}
		if _, ok, err := d.Lookup(blob.Workspace, blob.Data, randID(r)); ok || err != nil {
			t.Fatalf("random id found: %v, %v", ok, err)
		}
	}
	if got := index.FilterRoom(d); got <= room {
		t.Fatalf("filter room %d after %d more keys, first filter's %d", got, len(locations(objs...)), room)
	}
	checkDB(t, d, locations(objs...))
}

// Over a large index the filter waits for one miss per
// filterEntriesPerMiss entries (here one per entry), not only
// FilterAfterMisses: its build reads every leaf of the blobs.
func TestLookupFilterWaitsOnLargeIndex(t *testing.T) {
	defer index.SetFilterEntriesPerMiss(1)()
	r := seedtest.Rand(t)
	d := tempDB(t)
	var objs []*index.Object
	entries := 0
	for entries < 2*index.FilterAfterMisses {
		o := randObject(r, blob.Workspace, 20, 100)
		mustApply(t, r, d, o)
		objs = append(objs, o)
		for _, p := range o.Packs {
			entries += len(p.Entries)
		}
	}
	miss := func(n int) {
		t.Helper()
		for range n {
			if _, ok, err := d.Lookup(blob.Workspace, blob.Data, randID(r)); ok || err != nil {
				t.Fatalf("random id found: %v, %v", ok, err)
			}
		}
	}
	miss(index.FilterAfterMisses)
	if index.FilterBuilt(d) {
		t.Fatalf("filter built after %d misses over %d entries", index.FilterAfterMisses, entries)
	}
	miss(entries - index.FilterAfterMisses - 1)
	if index.FilterBuilt(d) {
		t.Fatalf("filter built after %d misses over %d entries", entries-1, entries)
	}
	miss(1)
	if !index.FilterBuilt(d) {
		t.Fatalf("no filter after %d misses over %d entries", entries, entries)
	}
	checkDB(t, d, locations(objs...))
}
