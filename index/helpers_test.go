package index_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

func randID(r *rand.Rand) blob.ID {
	var id blob.ID
	for i := 0; i < blob.IDSize; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	return id
}

// randPack returns a pack of n valid entries laid out back to back, with
// some header bytes after the last blob.
func randPack(r *rand.Rand, n int) index.PackInfo {
	p := index.PackInfo{ID: randID(r), Entries: make([]pack.Entry, 0, n)}
	var off uint32
	for range n {
		e := pack.Entry{
			Type:   blob.Data,
			ID:     randID(r),
			Offset: off,
			Length: crypt.Overhead + r.Uint32N(64<<10),
		}
		if r.IntN(4) == 0 {
			e.Type = blob.Tree
		}
		if r.IntN(2) == 0 {
			e.Flags = pack.FlagZstd
			e.PlainLen = r.Uint32N(pack.MaxBlobSize + 1)
		} else {
			e.PlainLen = e.Length - crypt.Overhead
		}
		p.Entries = append(p.Entries, e)
		off += e.Length
	}
	p.Size = off + crypt.Overhead + pack.TrailerSize + r.Uint32N(8192)
	return p
}

// randObject returns an object of tier t with nPacks packs of up to
// maxEntries entries (a pack may be empty) and up to 3 superseded ids.
func randObject(r *rand.Rand, t blob.Tier, nPacks, maxEntries int) *index.Object {
	o := &index.Object{Tier: t}
	for range r.IntN(4) {
		o.Supersedes = append(o.Supersedes, randID(r))
	}
	for range nPacks {
		o.Packs = append(o.Packs, randPack(r, r.IntN(maxEntries+1)))
	}
	return o
}

// equalObjects compares two objects field by field; a nil and an empty
// slice are equal.
func equalObjects(a, b *index.Object) bool {
	return a.Tier == b.Tier && slices.Equal(a.Supersedes, b.Supersedes) &&
		slices.EqualFunc(a.Packs, b.Packs, func(x, y index.PackInfo) bool {
			return x.ID == y.ID && x.Size == y.Size && slices.Equal(x.Entries, y.Entries)
		})
}

// locations lists what an object says about each of its blobs, keyed the
// way the DB keys them.
type blobKey struct {
	tier blob.Tier
	typ  blob.Type
	id   blob.ID
}

func locations(objs ...*index.Object) map[blobKey]index.Location {
	m := map[blobKey]index.Location{}
	for _, o := range objs {
		for _, p := range o.Packs {
			for _, e := range p.Entries {
				m[blobKey{o.Tier, e.Type, e.ID}] = index.Location{Pack: p.ID, Entry: e}
			}
		}
	}
	return m
}

func mustOpenDB(t testing.TB, dir string, repo blob.ID) *index.DB {
	t.Helper()
	d, err := index.OpenDB(dir, repo)
	if err != nil {
		t.Fatalf("OpenDB(%s): %v", dir, err)
	}
	return d
}

// tempDB opens a DB of testRepo in a new temp dir, closed when the test ends.
func tempDB(t testing.TB) *index.DB {
	t.Helper()
	d := mustOpenDB(t, t.TempDir(), testRepo)
	t.Cleanup(func() { d.Close() })
	return d
}

// mustApply applies each object to d under a new random object id, and
// fails the test at the first error.
func mustApply(t testing.TB, r *rand.Rand, d *index.DB, objs ...*index.Object) {
	t.Helper()
	for _, o := range objs {
		if err := d.Apply(randID(r), o); err != nil {
			t.Fatal(err)
		}
	}
}

// dbContents reads every blob entry of every tier.
func dbContents(t testing.TB, d *index.DB) map[blobKey]index.Location {
	t.Helper()
	m := map[blobKey]index.Location{}
	for _, tier := range blob.Tiers {
		err := d.ForEachBlob(tier, func(l index.Location) error {
			k := blobKey{tier, l.Type, l.ID}
			if _, dup := m[k]; dup {
				t.Errorf("ForEachBlob(%s) returned %s twice", tier, l.ID.Short())
			}
			m[k] = l
			return nil
		})
		if err != nil {
			t.Fatalf("ForEachBlob(%s): %v", tier, err)
		}
	}
	return m
}

// checkDB asserts that d holds exactly want, through ForEachBlob, Lookup
// and Count.
func checkDB(t testing.TB, d *index.DB, want map[blobKey]index.Location) {
	t.Helper()
	got := dbContents(t, d)
	if len(got) != len(want) {
		t.Errorf("DB holds %d entries, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("ForEachBlob misses %s %s %s", k.tier, k.typ, k.id.Short())
		} else if g != w {
			t.Errorf("ForEachBlob %s = %+v, want %+v", k.id.Short(), g, w)
		}
		l, ok, err := d.Lookup(k.tier, k.typ, k.id)
		if err != nil || !ok || l != w {
			t.Errorf("Lookup(%s %s %s) = %+v, %v, %v; want %+v", k.tier, k.typ, k.id.Short(), l, ok, err, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("DB holds unexpected entry %s %s %s", k.tier, k.typ, k.id.Short())
		}
	}
	blobs, _, err := d.Count()
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	if blobs != len(want) {
		t.Errorf("Count = %d blobs, want %d", blobs, len(want))
	}
}

// randDataPack is randPack with every entry a data blob.
func randDataPack(r *rand.Rand, n int) index.PackInfo {
	p := randPack(r, n)
	for i := range p.Entries {
		p.Entries[i].Type = blob.Data
	}
	return p
}

// editClosedDB changes the closed DB file at path in one bbolt write
// transaction, as another program (or an older lifeboat) would.
func editClosedDB(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
}

// putFillerRecords writes batch i of n file cache records of about 200
// bytes each into workspace "ws": write load that grows the file.
func putFillerRecords(d *index.DB, i, n int) error {
	recs := make([]index.FileCacheRecord, n)
	for j := range recs {
		recs[j].Key, recs[j].Value = fmt.Appendf(nil, "filler-%06d-%03d-%090d", i, j, 0), make([]byte, 81)
	}
	return d.FileCachePut("ws", recs)
}

// untilClosed calls fn(0), fn(1), ... until done is closed or fn returns
// false.
func untilClosed(done <-chan struct{}, fn func(i int) bool) {
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		if !fn(i) {
			return
		}
	}
}

// mustGen returns d's removal generation.
func mustGen(t testing.TB, d *index.DB) uint64 {
	t.Helper()
	g, err := d.FileCacheGen()
	if err != nil {
		t.Fatal(err)
	}
	return g
}
