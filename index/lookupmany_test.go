package index_test

import (
	"errors"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// LookupMany agrees with Lookup for every id however the ids are spread
// over the keys: far apart (the cursor seeks), close together (it steps),
// asked twice, unknown, known only under another tier or type, and before
// and after every key in the DB.
func TestLookupManyAgreesWithLookup(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	ws := randObject(r, blob.Workspace, 40, 100)
	sens := randObject(r, blob.Sensitive, 10, 50)
	mustApply(t, r, d, ws, sens)
	known := locations(ws, sens)
	if err := d.LookupMany(blob.Workspace, blob.Data, nil, func(int, index.Location, bool) error {
		t.Fatal("called back for no ids")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var first, last blob.ID
	for i := range last {
		last[i] = 0xff
	}
	for _, q := range []struct {
		tier  blob.Tier
		typ   blob.Type
		every int // ask about one known id in this many
	}{
		{blob.Workspace, blob.Data, 1},
		{blob.Workspace, blob.Data, 30},
		{blob.Workspace, blob.Tree, 3},
		{blob.Sensitive, blob.Data, 12},
		{blob.Sensitive, blob.Tree, 1},
	} {
		ids := []blob.ID{first, last}
		for k := range known { // every tier and type: the others must not match
			if r.IntN(q.every) == 0 {
				ids = append(ids, k.id)
			}
		}
		for range 50 {
			ids = append(ids, randID(r))
		}
		for range 20 {
			ids = append(ids, ids[r.IntN(len(ids))])
		}
		r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		called := make([]bool, len(ids))
		found := 0
		err := d.LookupMany(q.tier, q.typ, ids, func(i int, loc index.Location, ok bool) error {
			if called[i] {
				t.Fatalf("called back twice for id %d", i)
			}
			called[i] = true
			wloc, wok, err := d.Lookup(q.tier, q.typ, ids[i])
			if err != nil || ok != wok || loc != wloc {
				t.Fatalf("%s %s %s: LookupMany = %+v, %v; Lookup = %+v, %v, %v", q.tier, q.typ, ids[i].Short(), loc, ok, wloc, wok, err)
			}
			if ok {
				found++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range called {
			if !c {
				t.Fatalf("%s %s: no call back for id %d of %d", q.tier, q.typ, i, len(ids))
			}
		}
		if found == 0 {
			t.Fatalf("%s %s: none of %d ids found", q.tier, q.typ, len(ids))
		}
		// An error from the callback stops the lookups and is returned.
		stop, calls := errors.New("stop"), 0
		err = d.LookupMany(q.tier, q.typ, ids, func(int, index.Location, bool) error { calls++; return stop })
		if err != stop || calls != 1 {
			t.Errorf("%s %s: LookupMany with a failing callback: %v after %d calls", q.tier, q.typ, err, calls)
		}
	}
}
