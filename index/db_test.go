package index_test

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

var testRepo = blob.ID{0x42, 0x42}

func TestOpenDBFresh(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "cache", "nested")
	d := mustOpenDB(t, dir, testRepo)
	defer d.Close()
	if d.Private() {
		t.Error("a fresh DB is private")
	}
	if want := filepath.Join(dir, "index.db"); d.Path() != want {
		t.Errorf("Path = %s, want %s", d.Path(), want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory: %v, mode %v; want 0700", err, fi.Mode())
	}
	blobs, packs, err := d.Count()
	if err != nil || blobs != 0 || packs != 0 {
		t.Errorf("Count = %d, %d, %v; want 0, 0", blobs, packs, err)
	}
	if _, ok, err := d.Lookup(blob.Workspace, blob.Data, blob.ID{1}); ok || err != nil {
		t.Errorf("Lookup in an empty DB = %v, %v", ok, err)
	}
	checkDB(t, d, nil)
	if err := d.ForEachPack(func(blob.ID, blob.Tier, uint32) error { return errors.New("called") }); err != nil {
		t.Errorf("ForEachPack on an empty DB: %v", err)
	}
}

func TestApplyLookup(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	ws := randObject(r, blob.Workspace, 20, 30)
	sens := randObject(r, blob.Sensitive, 10, 30)
	mustApply(t, r, d, ws, sens)
	want := locations(ws, sens)
	checkDB(t, d, want)

	// A blob is found only under its own tier and type.
	for k := range want {
		other := blob.Workspace
		if k.tier == blob.Workspace {
			other = blob.Sensitive
		}
		if _, ok, _ := d.Lookup(other, k.typ, k.id); ok {
			t.Errorf("%s blob %s found in the %s tier", k.tier, k.id.Short(), other)
		}
		otherType := blob.Data
		if k.typ == blob.Data {
			otherType = blob.Tree
		}
		if _, ok, _ := d.Lookup(k.tier, otherType, k.id); ok {
			t.Errorf("%s blob %s found as %s", k.typ, k.id.Short(), otherType)
		}
	}
	for range 100 {
		if _, ok, err := d.Lookup(blob.Workspace, blob.Data, randID(r)); ok || err != nil {
			t.Fatalf("Lookup of a random id = %v, %v", ok, err)
		}
	}

	// Count and ForEachPack see every pack with its tier and size.
	_, packs, err := d.Count()
	if err != nil || packs != len(ws.Packs)+len(sens.Packs) {
		t.Errorf("Count packs = %d, %v; want %d", packs, err, len(ws.Packs)+len(sens.Packs))
	}
	type packVal struct {
		tier blob.Tier
		size uint32
	}
	wantPacks := map[blob.ID]packVal{}
	for _, o := range []*index.Object{ws, sens} {
		for _, p := range o.Packs {
			wantPacks[p.ID] = packVal{o.Tier, p.Size}
		}
	}
	gotPacks := map[blob.ID]packVal{}
	err = d.ForEachPack(func(id blob.ID, tier blob.Tier, size uint32) error {
		gotPacks[id] = packVal{tier, size}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(gotPacks) != len(wantPacks) {
		t.Errorf("ForEachPack saw %d packs, want %d", len(gotPacks), len(wantPacks))
	}
	for id, w := range wantPacks {
		if gotPacks[id] != w {
			t.Errorf("pack %s = %+v, want %+v", id.Short(), gotPacks[id], w)
		}
	}

	// Persisted across a close.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpenDB(t, filepath.Dir(d.Path()), testRepo)
	defer d.Close()
	checkDB(t, d, want)
}

func TestForEachBlobByTier(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	objs := map[blob.Tier]*index.Object{}
	for _, tier := range blob.Tiers {
		objs[tier] = randObject(r, tier, 5, 20)
		mustApply(t, r, d, objs[tier])
	}
	for _, tier := range blob.Tiers {
		want := locations(objs[tier])
		n := 0
		err := d.ForEachBlob(tier, func(l index.Location) error {
			n++
			if w, ok := want[blobKey{tier, l.Type, l.ID}]; !ok || w != l {
				t.Errorf("ForEachBlob(%s) returned %+v, not an entry of that tier", tier, l)
			}
			return nil
		})
		if err != nil || n != len(want) {
			t.Errorf("ForEachBlob(%s) = %d entries, %v; want %d", tier, n, err, len(want))
		}
	}
	// An error from fn stops the walk and is returned.
	stop := errors.New("stop")
	calls := 0
	err := d.ForEachBlob(blob.Workspace, func(index.Location) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("ForEachBlob with a failing fn = %v after %d calls", err, calls)
	}
	err = d.ForEachPack(func(blob.ID, blob.Tier, uint32) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("ForEachPack with a failing fn = %v", err)
	}
	// An unknown tier has no entries.
	err = d.ForEachBlob(blob.Tier(3), func(l index.Location) error {
		t.Errorf("ForEachBlob(3) returned %+v", l)
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestApplyOverwrites(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	a := randObject(r, blob.Workspace, 2, 10)
	// b repacks a's first pack: same blobs, new pack.
	moved := randPack(r, 0)
	moved.Entries = a.Packs[0].Entries
	moved.Size = a.Packs[0].Size
	b := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{moved}}
	mustApply(t, r, d, a, b)
	want := locations(a, b)
	checkDB(t, d, want)
	for _, e := range moved.Entries {
		if l, _, _ := d.Lookup(blob.Workspace, e.Type, e.ID); l.Pack != moved.ID {
			t.Errorf("blob %s still points at pack %s, want the newer %s", e.ID.Short(), l.Pack.Short(), moved.ID.Short())
		}
	}
}

func TestOtherRepoResets(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	mustApply(t, r, d, randObject(r, blob.Workspace, 3, 10))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	other := blob.ID{0x99}
	d = mustOpenDB(t, dir, other)
	checkDB(t, d, nil)
	if _, packs, _ := d.Count(); packs != 0 {
		t.Errorf("DB of another repository kept %d packs", packs)
	}
	o := randObject(r, blob.Workspace, 3, 10)
	mustApply(t, r, d, o)
	checkDB(t, d, locations(o))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the first repository: reset again, the other's entries go.
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	checkDB(t, d, nil)
}

func TestOpenDBBusy(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir := t.TempDir()
	first := mustOpenDB(t, dir, testRepo)
	a := randObject(r, blob.Workspace, 3, 10)
	mustApply(t, r, first, a)
	second := mustOpenDB(t, dir, testRepo)
	if !second.Private() {
		t.Fatal("second OpenDB on a held directory did not get a private DB")
	}
	if first.Private() {
		t.Fatal("first DB became private")
	}
	if second.Path() == first.Path() || filepath.Dir(second.Path()) != dir {
		t.Fatalf("private DB at %s, shared at %s", second.Path(), first.Path())
	}
	// The private DB starts empty and works on its own.
	checkDB(t, second, nil)
	b := randObject(r, blob.Workspace, 3, 10)
	mustApply(t, r, second, b)
	checkDB(t, second, locations(b))
	checkDB(t, first, locations(a))
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(second.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("private DB file after Close: %v", err)
	}
	checkDB(t, first, locations(a))
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first.Path()); err != nil {
		t.Fatalf("shared DB file after Close: %v", err)
	}
	// Once released, the shared file is used again, with its contents.
	d := mustOpenDB(t, dir, testRepo)
	defer d.Close()
	if d.Private() {
		t.Fatal("OpenDB after the holder closed got a private DB")
	}
	checkDB(t, d, locations(a))
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("cache directory holds %d files, want only index.db", len(entries))
	}
}

func TestOpenDBBusyConcurrent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 4
	dbs := make([]*index.DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { dbs[i], errs[i] = index.OpenDB(dir, testRepo) })
	}
	wg.Wait()
	shared := 0
	paths := map[string]bool{}
	for i, d := range dbs {
		if errs[i] != nil {
			t.Fatalf("OpenDB %d: %v", i, errs[i])
		}
		if !d.Private() {
			shared++
		}
		paths[d.Path()] = true
		if err := d.Apply(blob.ID{byte(i)}, &index.Object{Tier: blob.Workspace}); err != nil {
			t.Errorf("Apply on DB %d: %v", i, err)
		}
	}
	if shared != 1 || len(paths) != n {
		t.Errorf("%d shared DBs and %d distinct paths, want 1 and %d", shared, len(paths), n)
	}
	for _, d := range dbs {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("cache directory holds %d files after Close, want only index.db", len(entries))
	}
}

func TestConcurrentLookupAndApply(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	objs := make([]*index.Object, 8)
	ids := make([]blob.ID, len(objs))
	for i := range objs {
		objs[i] = randObject(r, blob.Tiers[i%2], 5, 20)
		ids[i] = randID(r)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, o := range objs {
			if err := d.Apply(ids[i], o); err != nil {
				t.Error(err)
			}
		}
	})
	for _, o := range objs {
		wg.Go(func() {
			for _, p := range o.Packs {
				for _, e := range p.Entries {
					if l, ok, err := d.Lookup(o.Tier, e.Type, e.ID); err != nil || (ok && (l.Pack != p.ID || l.Entry != e)) {
						t.Errorf("Lookup during Apply = %+v, %v, %v", l, ok, err)
					}
				}
			}
			if _, _, err := d.Count(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	checkDB(t, d, locations(objs...))
}
