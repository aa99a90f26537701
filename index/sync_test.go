package index_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// fakeSource is an in-memory index.Source. Objects listed in locked fail
// to load with an error wrapping crypt.ErrTierLocked; those in failing
// with their error.
type fakeSource struct {
	mu      sync.Mutex
	objs    map[blob.ID]*index.Object
	locked  map[blob.ID]bool
	failing map[blob.ID]error
	listErr error
	loads   map[blob.ID]int
	onLoad  func() // called, unlocked, at the start of each LoadIndex
	onList  func() // called, unlocked, once ListIndex has listed every object
}

func newFakeSource() *fakeSource {
	return &fakeSource{objs: map[blob.ID]*index.Object{}, locked: map[blob.ID]bool{},
		failing: map[blob.ID]error{}, loads: map[blob.ID]int{}}
}

func (s *fakeSource) ListIndex(ctx context.Context, fn func(blob.ID) error) error {
	s.mu.Lock()
	ids := slices.SortedFunc(maps.Keys(s.objs), func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	listErr := s.listErr
	s.mu.Unlock()
	if listErr != nil {
		return listErr
	}
	for _, id := range ids {
		if err := fn(id); err != nil {
			return err
		}
	}
	if s.onList != nil {
		s.onList()
	}
	return nil
}

func (s *fakeSource) LoadIndex(ctx context.Context, id blob.ID) (*index.Object, error) {
	if s.onLoad != nil {
		s.onLoad()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loads[id]++
	if err := s.failing[id]; err != nil {
		return nil, err
	}
	o, ok := s.objs[id]
	if !ok {
		return nil, fmt.Errorf("index object %s not found", id.Short())
	}
	if s.locked[id] {
		return nil, fmt.Errorf("loading index %s: %w", id.Short(), fmt.Errorf("sensitive tier: %w", crypt.ErrTierLocked))
	}
	return o, nil
}

func (s *fakeSource) totalLoads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.loads {
		n += c
	}
	clear(s.loads)
	return n
}

func (s *fakeSource) all() []*index.Object {
	return slices.Collect(maps.Values(s.objs))
}

func mustSync(t *testing.T, d *index.DB, src index.Source, want index.SyncStats) {
	t.Helper()
	st, err := d.Sync(context.Background(), src)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("Sync = %+v, want %+v", st, want)
	}
}

func TestSyncAppliesNewObjects(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	for i := range 5 {
		src.objs[randID(r)] = randObject(r, blob.Tiers[i%2], 4, 15)
	}
	mustSync(t, d, src, index.SyncStats{Applied: 5})
	checkDB(t, d, locations(src.all()...))
	if n := src.totalLoads(); n != 5 {
		t.Errorf("first Sync loaded %d objects, want 5", n)
	}

	// Nothing new: nothing loaded, nothing applied.
	mustSync(t, d, src, index.SyncStats{})
	if n := src.totalLoads(); n != 0 {
		t.Errorf("second Sync loaded %d objects, want 0", n)
	}

	// Two more: only those are loaded.
	for range 2 {
		src.objs[randID(r)] = randObject(r, blob.Workspace, 3, 15)
	}
	mustSync(t, d, src, index.SyncStats{Applied: 2})
	if n := src.totalLoads(); n != 2 {
		t.Errorf("third Sync loaded %d objects, want 2", n)
	}
	checkDB(t, d, locations(src.all()...))

	// The record of applied objects survives a reopen.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpenDB(t, filepath.Dir(d.Path()), testRepo)
	defer d.Close()
	mustSync(t, d, src, index.SyncStats{})
	checkDB(t, d, locations(src.all()...))
}

// An applied object gone from the repository (a prune superseded it) is
// dropped without a rebuild: only the new objects are loaded, and the
// places in packs no object lists any more go.
func TestSyncDropsRemovedObjects(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	var ids []blob.ID
	for i := range 6 {
		id := randID(r)
		ids = append(ids, id)
		src.objs[id] = randObject(r, blob.Tiers[i%2], 4, 15)
	}
	mustSync(t, d, src, index.SyncStats{Applied: 6})
	removed := src.objs[ids[2]]
	delete(src.objs, ids[2])
	src.totalLoads()

	mustSync(t, d, src, index.SyncStats{Dropped: 1})
	if n := src.totalLoads(); n != 0 {
		t.Errorf("dropping a removed object loaded %d objects, want none", n)
	}
	checkDB(t, d, locations(src.all()...))
	for _, p := range removed.Packs {
		for _, e := range p.Entries {
			if _, ok, _ := d.Lookup(removed.Tier, e.Type, e.ID); ok {
				t.Fatalf("blob %s of a removed object still found", e.ID.Short())
			}
		}
	}
	wantPacks := 0
	for _, o := range src.objs {
		wantPacks += len(o.Packs)
	}
	if _, packs, _ := d.Count(); packs != wantPacks {
		t.Errorf("Count packs = %d after the drop, want %d", packs, wantPacks)
	}
	mustSync(t, d, src, index.SyncStats{})

	// A prune: one object replaces two.
	merged := &index.Object{Tier: blob.Workspace, Supersedes: []blob.ID{ids[0], ids[4]}}
	merged.Packs = append(slices.Clone(src.objs[ids[0]].Packs), src.objs[ids[4]].Packs...)
	delete(src.objs, ids[0])
	delete(src.objs, ids[4])
	src.objs[randID(r)] = merged
	src.totalLoads()
	mustSync(t, d, src, index.SyncStats{Applied: 1, Dropped: 2})
	if n := src.totalLoads(); n != 1 {
		t.Errorf("a prune's replacement made the sync load %d objects, want only it", n)
	}
	checkDB(t, d, locations(src.all()...))

	// Every object gone: an empty DB.
	clear(src.objs)
	mustSync(t, d, src, index.SyncStats{Dropped: 4})
	checkDB(t, d, nil)
	if _, packs, _ := d.Count(); packs != 0 {
		t.Errorf("%d packs left with no index objects", packs)
	}
}

func TestSyncLockedTier(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	ws := randObject(r, blob.Workspace, 3, 10)
	sens := randObject(r, blob.Sensitive, 3, 10)
	wsID, sensID := randID(r), randID(r)
	src.objs[wsID], src.objs[sensID] = ws, sens
	src.locked[sensID] = true

	mustSync(t, d, src, index.SyncStats{Applied: 1, Locked: 1})
	checkDB(t, d, locations(ws))
	// Still locked: tried again, still counted locked, nothing rebuilt.
	mustSync(t, d, src, index.SyncStats{Locked: 1})
	checkDB(t, d, locations(ws))

	// Unlocked (a key with both tiers): applied now.
	src.locked[sensID] = false
	mustSync(t, d, src, index.SyncStats{Applied: 1})
	checkDB(t, d, locations(ws, sens))
	mustSync(t, d, src, index.SyncStats{})

	// A locked object that disappears never triggers a rebuild.
	lockedID := randID(r)
	src.objs[lockedID] = randObject(r, blob.Sensitive, 1, 5)
	src.locked[lockedID] = true
	mustSync(t, d, src, index.SyncStats{Locked: 1})
	delete(src.objs, lockedID)
	mustSync(t, d, src, index.SyncStats{})
	checkDB(t, d, locations(ws, sens))
	// ... and is forgotten, so prune does not take it for an object the
	// index never finished applying.
	err := d.ForEachObject(func(id blob.ID, _ blob.Tier, s index.ObjectState) error {
		if id == lockedID || s != index.ObjectApplied {
			t.Errorf("object %s left in state %d", id.Short(), s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSyncLoadError(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	boom := errors.New("backend unreachable")
	src, badID := sourceWithFailing(r, func(blob.ID) error { return fmt.Errorf("load: %w", boom) })
	_, err := d.Sync(context.Background(), src)
	if !errors.Is(err, boom) {
		t.Fatalf("Sync with a failing object = %v, want an error wrapping %v", err, boom)
	}
	if errors.Is(err, crypt.ErrTierLocked) {
		t.Fatal("a load error is reported as a locked tier")
	}
	// The failing object is not recorded: once it loads, Sync applies it
	// along with whatever the failed Sync did not reach.
	delete(src.failing, badID)
	st, err := d.Sync(context.Background(), src)
	if err != nil || st.Dropped != 0 || st.Locked != 0 || st.Applied < 1 {
		t.Fatalf("Sync after the error cleared = %+v, %v", st, err)
	}
	checkDB(t, d, locations(src.all()...))
	mustSync(t, d, src, index.SyncStats{})

	// A failing listing fails Sync and changes nothing.
	src.listErr = boom
	if _, err := d.Sync(context.Background(), src); !errors.Is(err, boom) {
		t.Fatalf("Sync with a failing listing = %v", err)
	}
	src.listErr = nil
	checkDB(t, d, locations(src.all()...))
}

func TestSyncCancelled(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src := newFakeSource()
	for range 3 {
		src.objs[randID(r)] = randObject(r, blob.Workspace, 2, 10)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Sync(ctx, src); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sync with a cancelled context = %v", err)
	}
	mustSync(t, d, src, index.SyncStats{Applied: 3})
}

// sealedSource serves sealed index objects and opens them with keys, as
// the repository does: a tier the keys lack fails with ErrTierLocked.
type sealedSource struct {
	keys    *crypt.MasterKeys
	objects map[blob.ID][]byte
}

func (s *sealedSource) ListIndex(ctx context.Context, fn func(blob.ID) error) error {
	for id := range s.objects {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}

func (s *sealedSource) LoadIndex(ctx context.Context, id blob.ID) (*index.Object, error) {
	return index.Open(s.keys, s.objects[id])
}

func TestSyncWithSealedObjects(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	m := crypt.NewMasterKeys()
	wsOnly, err := m.Restrict([]blob.Tier{blob.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	sealed := map[blob.ID][]byte{}
	var objs []*index.Object
	for i := range 4 {
		o := randObject(r, blob.Tiers[i%2], 3, 10)
		k, _ := m.Tier(o.Tier)
		b, err := index.Seal(k, o)
		if err != nil {
			t.Fatal(err)
		}
		sealed[randID(r)] = b
		objs = append(objs, o)
	}
	d := tempDB(t)
	mustSync(t, d, &sealedSource{wsOnly, sealed}, index.SyncStats{Applied: 2, Locked: 2})
	checkDB(t, d, locations(objs[0], objs[2]))
	mustSync(t, d, &sealedSource{m, sealed}, index.SyncStats{Applied: 2})
	checkDB(t, d, locations(objs...))
}

// An object listed and then removed before Sync loads it (a prune's delete
// phase runs meanwhile) is skipped, not an error; the rest is applied.
func TestSyncObjectRemovedWhileSyncing(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	src, goneID := sourceWithFailing(r, func(id blob.ID) error {
		return fmt.Errorf("load index/%s: %w", id.Short(), backend.ErrNotFound)
	})
	st, err := d.Sync(context.Background(), src)
	if err != nil || st.Applied != 3 {
		t.Fatalf("Sync with an object removed meanwhile = %+v, %v; want 3 applied, no error", st, err)
	}
	delete(src.objs, goneID)
	delete(src.failing, goneID)
	checkDB(t, d, locations(src.all()...))
}

// sourceWithFailing is a source of three good index objects and a fourth,
// returned, whose load fails with fail's error.
func sourceWithFailing(r *rand.Rand, fail func(blob.ID) error) (*fakeSource, blob.ID) {
	src := newFakeSource()
	for range 3 {
		src.objs[randID(r)] = randObject(r, blob.Workspace, 2, 10)
	}
	id := randID(r)
	src.objs[id] = randObject(r, blob.Workspace, 2, 10)
	src.failing[id] = fail(id)
	return src, id
}
