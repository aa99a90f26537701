package index_test

import (
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// SetCondemned writes only what changes: asked again for the marks the DB
// already holds (every capture's session start asks) it commits nothing
// and reports none added; a new pack, or one no longer condemned with
// exact, is written, and the removal generation moves only when a mark is
// set.
func TestSetCondemnedWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	p1, p2 := randID(r), randID(r)
	set := func(step string, packs map[blob.ID]bool, exact bool, wantAdded int, wantCommit bool) {
		t.Helper()
		before := index.CommittedTx(d)
		added, err := d.SetCondemned(packs, exact)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if committed := index.CommittedTx(d) != before; added != wantAdded || committed != wantCommit {
			t.Errorf("%s: %d added, committed %v; want %d, %v", step, added, committed, wantAdded, wantCommit)
		}
	}
	reasons := func(step string, want1, want2 byte) {
		t.Helper()
		for _, c := range []struct {
			id   blob.ID
			want byte
		}{{p1, want1}, {p2, want2}} {
			if got, err := d.Unusable(c.id); err != nil || got != c.want {
				t.Errorf("%s: pack %s unusable %d (%v), want %d", step, c.id.Short(), got, err, c.want)
			}
		}
	}

	set("none, on an empty DB", nil, true, 0, false)
	g0 := mustGen(t, d)
	set("p1", map[blob.ID]bool{p1: true}, true, 1, true)
	reasons("p1", index.UnusableCondemned, 0)
	g1 := mustGen(t, d)
	if g1 == g0 {
		t.Errorf("condemning p1 left the removal generation at %d", g0)
	}
	set("p1 again", map[blob.ID]bool{p1: true}, true, 0, false)
	set("p1 again, not exact", map[blob.ID]bool{p1: true}, false, 0, false)
	set("p2 besides", map[blob.ID]bool{p2: true}, false, 1, true)
	reasons("p2 besides", index.UnusableCondemned, index.UnusableCondemned)
	set("p2 only", map[blob.ID]bool{p2: true}, true, 0, true)
	reasons("p2 only", 0, index.UnusableCondemned)
	set("p2 only again", map[blob.ID]bool{p2: true}, true, 0, false)
	set("none", nil, true, 0, true)
	reasons("none", 0, 0)
	set("none again", nil, true, 0, false)
}
