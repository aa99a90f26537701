package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
)

// packSource is a fakeSource that also says which packs are stored (an
// index.PackSource), and counts how it was asked.
type packSource struct {
	*fakeSource
	packs        map[blob.ID]bool
	stats, lists int
}

func newPackSource() *packSource {
	return &packSource{fakeSource: newFakeSource(), packs: map[blob.ID]bool{}}
}

func (s *packSource) PackStored(ctx context.Context, id blob.ID) (bool, error) {
	s.stats++
	return s.packs[id], nil
}

func (s *packSource) ListPacks(ctx context.Context, fn func(blob.ID) error) error {
	s.lists++
	for id := range s.packs {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

var _ index.PackSource = (*packSource)(nil)

// addObject adds to s an index object of n new stored packs, of two
// data blobs each.
func (s *packSource) addObject(r *rand.Rand, n int) {
	o := &index.Object{Tier: blob.Workspace}
	for range n {
		p := randDataPack(r, 2)
		o.Packs = append(o.Packs, p)
		s.packs[p.ID] = true
	}
	s.objs[randID(r)] = o
}

// copyOf returns pack p's entries placed in a new pack at other offsets:
// the same blobs stored again.
func copyOf(p index.PackInfo, id blob.ID) index.PackInfo {
	c := index.PackInfo{ID: id, Size: p.Size + 100, Entries: slices.Clone(p.Entries)}
	for i := range c.Entries {
		c.Entries[i].Offset += 100
	}
	return c
}

func places(t *testing.T, d *index.DB, tier blob.Tier, e pack.Entry) []blob.ID {
	t.Helper()
	locs, err := d.LookupAll(tier, e.Type, e.ID)
	if err != nil {
		t.Fatalf("LookupAll(%s): %v", e.ID.Short(), err)
	}
	var ids []blob.ID
	for _, l := range locs {
		if l.ID != e.ID || l.Type != e.Type {
			t.Fatalf("LookupAll(%s) returned blob %s", e.ID.Short(), l.ID.Short())
		}
		ids = append(ids, l.Pack)
	}
	return ids
}

// A stale index object (its pack gone) applied after the live one, or
// before it in a rebuild, never takes a blob over: Lookup answers with
// the stored pack, and LookupAll lists the stale place after it.
func TestSyncStalePlaceNeverWins(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	live := randDataPack(r, 50)
	stale := copyOf(live, randID(r))
	liveObj, staleObj := randID(r), randID(r)
	// Both orders of the object ids: a rebuild applies them in id order.
	if string(liveObj[:]) > string(staleObj[:]) {
		liveObj, staleObj = staleObj, liveObj
	}
	for _, order := range []string{"stale applied later", "rebuild, stale first", "rebuild, stale last"} {
		t.Run(order, func(t *testing.T) {
			d := tempDB(t)
			src := newPackSource()
			src.packs[live.ID] = true
			lo, so := liveObj, staleObj
			if order == "rebuild, stale first" {
				lo, so = so, lo
			}
			src.objs[lo] = &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{live}}
			if order == "stale applied later" {
				mustSync(t, d, src, index.SyncStats{Applied: 1})
			}
			src.objs[so] = &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{stale}}
			st, err := d.Sync(context.Background(), src)
			if err != nil || st.UnstoredPacks != 1 {
				t.Fatalf("Sync = %+v, %v; want one pack not stored", st, err)
			}
			checkDB(t, d, locations(src.objs[lo]))
			for _, e := range live.Entries {
				if got := places(t, d, blob.Workspace, e); !slices.Equal(got, []blob.ID{live.ID, stale.ID}) {
					t.Fatalf("places of %s: %v, want the stored pack then the stale one", e.ID.Short(), got)
				}
			}
		})
	}
}

// With every pack stored (or a Source that cannot tell), the last place
// applied wins as before, and the one it replaced stays as a copy.
func TestApplyKeepsEveryPlace(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	a := randDataPack(r, 40)
	b := copyOf(a, randID(r))
	oa := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{a}}
	ob := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{b}}
	mustApply(t, r, d, oa, ob)
	checkDB(t, d, locations(ob))
	n := 0
	err := d.ForEachBlobCopies(blob.Workspace, func(locs []index.Location) error {
		n++
		if len(locs) != 2 || locs[0].Pack != b.ID || locs[1].Pack != a.ID || locs[0].ID != locs[1].ID {
			return fmt.Errorf("ForEachBlobCopies gave %+v", locs)
		}
		return nil
	})
	if err != nil || n != len(a.Entries) {
		t.Fatalf("ForEachBlobCopies: %d blobs, %v", n, err)
	}
	// Applying a again makes it the place again; b is the copy.
	mustApply(t, r, d, oa)
	checkDB(t, d, locations(oa))
	for _, e := range a.Entries {
		if got := places(t, d, blob.Workspace, e); !slices.Equal(got, []blob.ID{a.ID, b.ID}) {
			t.Fatalf("places after re-applying: %v", got)
		}
	}
}

// Sync asks about a few packs one by one and lists them all, once, when
// many are new.
func TestSyncAsksWhichPacksAreStored(t *testing.T) {
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newPackSource()
	src.addObject(r, 3)
	mustSync(t, d, src, index.SyncStats{Applied: 1})
	if src.stats != 3 || src.lists != 0 {
		t.Fatalf("3 new packs: %d stats, %d lists", src.stats, src.lists)
	}
	defer index.SetSyncGroupEntries(10)()
	src.stats = 0
	for range 10 {
		src.addObject(r, 5)
	}
	mustSync(t, d, src, index.SyncStats{Applied: 10})
	if src.stats > 16 || src.lists != 1 {
		t.Fatalf("50 new packs in 10 groups: %d stats, %d lists; want at most 16 stats, then one listing", src.stats, src.lists)
	}
}

// Drop of a blob's pack makes a copy in a pack that stays its place;
// copies in dropped packs go.
func TestDropPromotesCopy(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	a := randDataPack(r, 30)
	b, c := copyOf(a, randID(r)), copyOf(a, randID(r))
	for _, p := range []index.PackInfo{a, b, c} {
		mustApply(t, r, d, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{p}})
	}
	// c is the place, a and b copies. Dropping c and a leaves b.
	if err := d.Drop(nil, map[blob.ID]bool{c.ID: true, a.ID: true}); err != nil {
		t.Fatal(err)
	}
	checkDB(t, d, locations(&index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{b}}))
	for _, e := range a.Entries {
		if got := places(t, d, blob.Workspace, e); !slices.Equal(got, []blob.ID{b.ID}) {
			t.Fatalf("places after the drop: %v", got)
		}
	}
	if err := d.Drop(nil, map[blob.ID]bool{b.ID: true}); err != nil {
		t.Fatal(err)
	}
	checkDB(t, d, nil)
}

// PreferStored moves a blob whose place is in a pack that is gone to a
// stored copy, and moves nothing else.
func TestPreferStored(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	a := randDataPack(r, 20)
	b := copyOf(a, randID(r))
	solo := randDataPack(r, 5)
	for _, p := range []index.PackInfo{a, b, solo} {
		mustApply(t, r, d, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{p}})
	}
	stored := func(id blob.ID) bool { return id != b.ID && id != solo.ID }
	n, err := d.PreferStored(stored)
	if err != nil || n != len(a.Entries) {
		t.Fatalf("PreferStored moved %d, %v; want %d", n, err, len(a.Entries))
	}
	checkDB(t, d, locations(&index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{a, solo}}))
	if n, err := d.PreferStored(stored); err != nil || n != 0 {
		t.Fatalf("second PreferStored moved %d, %v", n, err)
	}
}

// Verify loads every object, applied or not; one damaged since it was
// applied, or an entry the DB lost, makes it rebuild the DB from the
// intact objects.
func TestVerifyRebuildsFromStoredObjects(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	src := newPackSource()
	var ids []blob.ID
	for range 4 {
		id := randID(r)
		ids = append(ids, id)
		o := randObject(r, blob.Workspace, 3, 10)
		src.objs[id] = o
		for _, p := range o.Packs {
			src.packs[p.ID] = true
		}
	}
	mustSync(t, d, src, index.SyncStats{Applied: 4})
	src.totalLoads()
	seen := 0
	st, err := d.Verify(context.Background(), src, func(blob.ID, *index.Object) error { seen++; return nil })
	if err != nil || st.Rebuilt || st.Objects != 4 || len(st.Damaged) != 0 || seen != 4 {
		t.Fatalf("Verify of an intact DB = %+v, %v (fn saw %d)", st, err, seen)
	}
	if n := src.totalLoads(); n != 4 {
		t.Fatalf("Verify loaded %d objects, want every one (4)", n)
	}

	// Damaged in the repository after it was applied: Sync skips it
	// (applied already), Verify sees it and drops its entries.
	src.failing[ids[1]] = fmt.Errorf("loading: %w", index.ErrObjectDamaged)
	mustSync(t, d, src, index.SyncStats{})
	st, err = d.Verify(context.Background(), src, nil)
	if err != nil || !st.Rebuilt || !slices.Equal(st.Damaged, []blob.ID{ids[1]}) || st.Objects != 3 {
		t.Fatalf("Verify with a damaged applied object = %+v, %v", st, err)
	}
	intact := []*index.Object{src.objs[ids[0]], src.objs[ids[2]], src.objs[ids[3]]}
	checkDB(t, d, locations(intact...))
	delete(src.failing, ids[1])

	// An entry lost from the cache file: found, and rebuilt.
	st, err = d.Verify(context.Background(), src, nil)
	if err != nil || st.Rebuilt {
		t.Fatalf("Verify after the object is intact again = %+v, %v (it is applied by the Sync, not a rebuild)", st, err)
	}
	checkDB(t, d, locations(src.all()...))
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	var gone pack.Entry
	for _, p := range src.objs[ids[2]].Packs {
		if len(p.Entries) > 0 {
			gone = p.Entries[0]
		}
	}
	editClosedDB(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("blobs")).Delete(append([]byte{byte(blob.Workspace), byte(gone.Type)}, gone.ID[:]...))
	})
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	if _, ok, _ := d.Lookup(blob.Workspace, gone.Type, gone.ID); ok {
		t.Fatal("the entry was not removed from the file")
	}
	st, err = d.Verify(context.Background(), src, nil)
	if err != nil || !st.Rebuilt {
		t.Fatalf("Verify of a cache missing an entry = %+v, %v", st, err)
	}
	checkDB(t, d, locations(src.all()...))
}

// Once the blob filter is built (a capture's lookups missed), keys it
// rules out are put without a look at an earlier place; a blob placed
// twice in one application, or again later, still keeps both places.
func TestCopiesKeptWithFilter(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	for range index.FilterAfterMisses {
		if _, ok, err := d.Lookup(blob.Workspace, blob.Data, randID(r)); ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if !index.FilterBuilt(d) {
		t.Fatal("no filter after the misses")
	}
	a := randDataPack(r, 30)
	b, c := copyOf(a, randID(r)), copyOf(a, randID(r))
	if err := d.ApplyAll([]index.Named{
		{ID: randID(r), Object: &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{a}}},
		{ID: randID(r), Object: &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{b}}},
	}); err != nil {
		t.Fatal(err)
	}
	mustApply(t, r, d, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{c}})
	for _, e := range a.Entries {
		if got := places(t, d, blob.Workspace, e); len(got) != 3 || got[0] != c.ID {
			t.Fatalf("places of %s with the filter built: %v; want all three, the last applied first", e.ID.Short(), got)
		}
	}
}
