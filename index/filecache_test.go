package index_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
)

// get returns a copy of the record under key, nil when there is none.
func get(t *testing.T, d *index.DB, ws string, key []byte) []byte {
	t.Helper()
	var got []byte
	if err := d.FileCacheGet(ws, key, func(v []byte) { got = bytes.Clone(v) }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestFileCache(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	if v := get(t, d, "ws", []byte("p")); v != nil {
		t.Fatalf("Get before any Put = %x", v)
	}
	if n, err := d.FileCachePrune("ws", func([]byte) bool { return false }); n != 0 || err != nil {
		t.Fatalf("Prune before any Put = %d, %v", n, err)
	}
	want := map[string][]byte{}
	var recs []index.FileCacheRecord
	for i := range 500 {
		v := make([]byte, r.IntN(2000)+1)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		k := "part-" + strconv.Itoa(i)
		want[k] = v
		recs = append(recs, index.FileCacheRecord{Key: []byte(k), Value: v})
	}
	if err := d.FileCachePut("ws", recs); err != nil {
		t.Fatal(err)
	}
	if err := d.FileCachePut("other", recs[:10]); err != nil {
		t.Fatal(err)
	}
	check := func(d *index.DB, ws string, want map[string][]byte) {
		t.Helper()
		if n, err := d.FileCacheCount(ws); err != nil || n != len(want) {
			t.Errorf("%s: %d records (%v), want %d", ws, n, err, len(want))
		}
		for k, w := range want {
			if g := get(t, d, ws, []byte(k)); !bytes.Equal(g, w) {
				t.Fatalf("%s %s: %d bytes, want %d", ws, k, len(g), len(w))
			}
		}
	}
	check(d, "ws", want)

	// Records survive a reopen; prune keeps what keep accepts, per workspace.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	check(d, "ws", want)
	n, err := d.FileCachePrune("ws", func(k []byte) bool { return len(k)%2 == 0 })
	if err != nil {
		t.Fatal(err)
	}
	for k := range want {
		if len(k)%2 != 0 {
			delete(want, k)
			n--
		}
	}
	if n != 0 {
		t.Errorf("Prune count off by %d", n)
	}
	check(d, "ws", want)
	if c, _ := d.FileCacheCount("other"); c != 10 {
		t.Errorf("pruning ws left %d records in other, want 10", c)
	}
	if err := d.FileCachePut("ws", nil); err != nil {
		t.Errorf("empty Put: %v", err)
	}
}

func TestFileCacheRefusesBadInput(t *testing.T) {
	t.Parallel()
	d := tempDB(t)
	if err := d.FileCachePut("", []index.FileCacheRecord{{Key: []byte("p"), Value: []byte("v")}}); err == nil {
		t.Error("empty workspace key accepted")
	}
	big := make([]byte, bolt.MaxKeySize+1)
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Key: big, Value: []byte("v")}}); err == nil {
		t.Error("oversized key accepted")
	}
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Key: nil, Value: []byte("v")}}); err == nil {
		t.Error("empty key accepted")
	}
	if v := get(t, d, "ws", []byte("p")); v != nil {
		t.Errorf("after failed Puts: %x", v)
	}
}

// The first write drops version 1's bucket of one entry per file.
func TestFileCacheDropsVersion1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	editClosedDB(t, path, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("filecache"))
		if err != nil {
			return err
		}
		ws, err := b.CreateBucket([]byte("ws"))
		if err != nil {
			return err
		}
		return ws.Put([]byte("old entry"), make([]byte, 81))
	})
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	if v := get(t, d, "ws", []byte("old entry")); v != nil {
		t.Errorf("a version 1 entry is read as a record")
	}
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	editClosedDB(t, path, func(tx *bolt.Tx) error {
		if tx.Bucket([]byte("filecache")) != nil {
			t.Error("version 1's bucket is still there after a write")
		}
		return nil
	})
	d = mustOpenDB(t, dir, testRepo)
	if v := get(t, d, "ws", []byte("k")); string(v) != "v" {
		t.Errorf("record after the drop: %q", v)
	}
}

// FileCacheIndexed accepts a file only when its chunks are indexed data
// blobs of the tier adding up to its size.
func TestFileCacheIndexed(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	p := randPack(r, 8)
	var data []pack.Entry
	for _, e := range p.Entries {
		if e.Type == blob.Data {
			data = append(data, e)
		}
	}
	if len(data) < 2 {
		t.Skip("seed gave fewer than two data blobs")
	}
	mustApply(t, r, d, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{p}})
	size := uint64(data[0].PlainLen) + uint64(data[1].PlainLen)
	two := []blob.ID{data[0].ID, data[1].ID}
	cases := []struct {
		name string
		tier blob.Tier
		q    index.FileChunks
		want bool
	}{
		{"good", blob.Workspace, index.FileChunks{IDs: two, Size: size}, true},
		{"other tier", blob.Sensitive, index.FileChunks{IDs: two, Size: size}, false},
		{"missing", blob.Workspace, index.FileChunks{IDs: []blob.ID{data[0].ID, randID(r)}, Size: size}, false},
		{"size", blob.Workspace, index.FileChunks{IDs: two, Size: size + 1}, false},
		{"empty", blob.Workspace, index.FileChunks{}, false},
	}
	for _, c := range cases {
		q := []index.FileChunks{c.q}
		if err := d.FileCacheIndexed(c.tier, q); err != nil || q[0].Indexed != c.want {
			t.Errorf("%s: indexed %v (%v), want %v", c.name, q[0].Indexed, err, c.want)
		}
	}
	// Once their pack is dropped, the chunks are not indexed.
	if err := d.Drop(nil, map[blob.ID]bool{p.ID: true}); err != nil {
		t.Fatal(err)
	}
	q := []index.FileChunks{{IDs: two, Size: size}}
	if err := d.FileCacheIndexed(blob.Workspace, q); err != nil || q[0].Indexed {
		t.Errorf("after the pack was dropped: indexed %v (%v)", q[0].Indexed, err)
	}
}

// The removal generation moves on with every rebuild and every Drop that
// deletes entries, and only then.
func TestFileCacheGenMoves(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	d := tempDB(t)
	gen := func() uint64 { t.Helper(); return mustGen(t, d) }
	g0 := gen()
	src := newFakeSource()
	var ids []blob.ID
	for range 3 {
		id := randID(r)
		ids = append(ids, id)
		src.objs[id] = &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{randPack(r, 4)}}
	}
	if _, err := d.Sync(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if gen() != g0 {
		t.Errorf("applying objects moved the generation")
	}
	if err := d.Drop(nil, map[blob.ID]bool{randID(r): true}); err != nil {
		t.Fatal(err)
	}
	if gen() != g0 {
		t.Errorf("a Drop that deleted nothing moved the generation")
	}
	delete(src.objs, ids[1])
	if st, err := d.Sync(context.Background(), src); err != nil || st.Dropped != 1 {
		t.Fatalf("sync after removing an object: %+v %v; want it dropped", st, err)
	}
	if g := gen(); g <= g0 {
		t.Errorf("dropping a removed object's blobs left the generation at %d", g)
	}
}
