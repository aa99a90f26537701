package index_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/pack"
)

func TestFileCache(t *testing.T) {
	r := newRand(t)
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	if _, ok, err := d.FileCacheGet("ws", []byte("p")); ok || err != nil {
		t.Fatalf("Get before any Put = %v, %v", ok, err)
	}
	if n, err := d.FileCachePrune("ws", func([]byte) bool { return false }); n != 0 || err != nil {
		t.Fatalf("Prune before any Put = %d, %v", n, err)
	}
	want := map[string]index.FileEntry{}
	var recs []index.FileCacheRecord
	for i := range 500 {
		e := index.FileEntry{Dev: r.Uint64(), Inode: r.Uint64(), Size: r.Uint64(), MtimeNs: r.Int64(), CtimeNs: -r.Int64(), Xattrs: i%3 == 0}
		for range r.IntN(4) {
			e.Content = append(e.Content, randID(r))
		}
		k := "file-" + strconv.Itoa(i)
		want[k] = e
		recs = append(recs, index.FileCacheRecord{Path: []byte(k), Entry: e})
	}
	if err := d.FileCachePut("ws", recs); err != nil {
		t.Fatal(err)
	}
	if err := d.FileCachePut("other", recs[:10]); err != nil {
		t.Fatal(err)
	}
	check := func(d *index.DB, ws string, want map[string]index.FileEntry) {
		t.Helper()
		if n, err := d.FileCacheCount(ws); err != nil || n != len(want) {
			t.Errorf("%s: %d entries (%v), want %d", ws, n, err, len(want))
		}
		for k, w := range want {
			g, ok, err := d.FileCacheGet(ws, []byte(k))
			if err != nil || !ok || g.Dev != w.Dev || g.Inode != w.Inode || g.Size != w.Size || g.MtimeNs != w.MtimeNs ||
				g.CtimeNs != w.CtimeNs || g.Xattrs != w.Xattrs || !slices.Equal(g.Content, w.Content) {
				t.Fatalf("%s %s: %+v %v %v, want %+v", ws, k, g, ok, err, w)
			}
		}
	}
	check(d, "ws", want)

	// Entries survive a reopen; prune keeps what keep accepts, per workspace.
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
		t.Errorf("pruning ws left %d entries in other, want 10", c)
	}
	if err := d.FileCachePut("ws", nil); err != nil {
		t.Errorf("empty Put: %v", err)
	}
}

func TestFileCacheRefusesBadInput(t *testing.T) {
	d := mustOpenDB(t, t.TempDir(), testRepo)
	defer d.Close()
	if err := d.FileCachePut("", []index.FileCacheRecord{{Path: []byte("p")}}); err == nil {
		t.Error("empty workspace key accepted")
	}
	big := make([]byte, bolt.MaxKeySize+1)
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Path: big}}); err == nil {
		t.Error("oversized file key accepted")
	}
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Path: nil}}); err == nil {
		t.Error("empty file key accepted")
	}
	if _, ok, err := d.FileCacheGet("ws", []byte("p")); ok || err != nil {
		t.Errorf("after failed Puts: %v %v", ok, err)
	}
}

func TestFileCacheCorruptEntry(t *testing.T) {
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	good := index.FileEntry{Size: 1, Content: []blob.ID{{1}}}
	if err := d.FileCachePut("ws", []index.FileCacheRecord{{Path: []byte("good"), Entry: good}}); err != nil {
		t.Fatal(err)
	}
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{"short": make([]byte, 80), "ragged": make([]byte, 81+31), "flags": append(append(make([]byte, 48), 0x80), make([]byte, 32)...)}
	editClosedDB(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("filecache")).Bucket([]byte("ws"))
		for k, v := range bad {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	for k := range bad {
		if _, ok, err := d.FileCacheGet("ws", []byte(k)); ok || !errors.Is(err, index.ErrCorrupt) {
			t.Errorf("%s: %v, %v; want ErrCorrupt", k, ok, err)
		}
	}
	if g, ok, err := d.FileCacheGet("ws", []byte("good")); !ok || err != nil || !slices.Equal(g.Content, good.Content) {
		t.Errorf("good entry: %+v %v %v", g, ok, err)
	}
}

// FileCacheLookup returns an entry only when its chunks are indexed data
// blobs of the tier adding up to its size, or its Gen is the current
// removal generation; it finds keys in any order, in one sweep.
func TestFileCacheLookup(t *testing.T) {
	r := newRand(t)
	d := mustOpenDB(t, t.TempDir(), testRepo)
	defer d.Close()
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
	if err := d.Apply(randID(r), &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{p}}); err != nil {
		t.Fatal(err)
	}
	gen, err := d.FileCacheGen()
	if err != nil {
		t.Fatal(err)
	}
	good := index.FileEntry{Dev: 1, Inode: 2, Size: uint64(data[0].PlainLen) + uint64(data[1].PlainLen),
		Gen: gen + 1000, Seal: randID(r), Content: []blob.ID{data[0].ID, data[1].ID}}
	missing := good
	missing.Content = []blob.ID{data[0].ID, randID(r)}
	wrongSize := good
	wrongSize.Size++
	empty := good
	empty.Content, empty.Size = nil, 0
	current := missing // stamped with the current generation: not looked up
	current.Gen = gen
	recs := []index.FileCacheRecord{{Path: []byte("good"), Entry: good}, {Path: []byte("missing"), Entry: missing},
		{Path: []byte("size"), Entry: wrongSize}, {Path: []byte("empty"), Entry: empty},
		{Path: []byte("current"), Entry: current}}
	if err := d.FileCachePut("ws", recs); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		tier blob.Tier
		want bool
	}{{"good", blob.Workspace, true}, {"good", blob.Sensitive, false}, {"missing", blob.Workspace, false},
		{"size", blob.Workspace, false}, {"empty", blob.Workspace, false}, {"absent", blob.Workspace, false},
		{"current", blob.Workspace, true}, {"current", blob.Sensitive, true}}
	for _, c := range cases {
		q := []index.FileCacheQuery{{Key: []byte(c.path)}}
		if err := d.FileCacheLookup("ws", c.tier, q); err != nil || q[0].Found != c.want {
			t.Errorf("%s in %s: found %v (%v), want %v", c.path, c.tier, q[0].Found, err, c.want)
		}
		if q[0].Found && q[0].Entry.Seal != good.Seal {
			t.Errorf("%s: seal not returned as stored", c.path)
		}
	}

	// Once a blob leaves the DB the generation moves on, and the entry
	// stamped with the old one is looked up chunk by chunk: its chunks are
	// gone with their pack.
	if err := d.Drop(nil, map[blob.ID]bool{p.ID: true}); err != nil {
		t.Fatal(err)
	}
	if g, err := d.FileCacheGen(); err != nil || g <= gen {
		t.Fatalf("generation after Drop: %d (%v), was %d", g, err, gen)
	}
	q := []index.FileCacheQuery{{Key: []byte("current")}, {Key: []byte("good")}}
	if err := d.FileCacheLookup("ws", blob.Workspace, q); err != nil || q[0].Found || q[1].Found {
		t.Errorf("after the pack was dropped: found %v %v (%v), want neither", q[0].Found, q[1].Found, err)
	}
}

// The removal generation moves on with every rebuild and every Drop that
// deletes entries, and only then.
func TestFileCacheGenMoves(t *testing.T) {
	r := newRand(t)
	d := mustOpenDB(t, t.TempDir(), testRepo)
	defer d.Close()
	gen := func() uint64 {
		t.Helper()
		g, err := d.FileCacheGen()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
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
	if st, err := d.Sync(context.Background(), src); err != nil || !st.Rebuilt {
		t.Fatalf("sync after removing an object: %+v %v", st, err)
	}
	if g := gen(); g <= g0 {
		t.Errorf("a rebuild left the generation at %d", g)
	}
}

// Lookups of many keys in random order, among entries grouped by prefix as
// the capture makes them, find exactly the stored ones.
func TestFileCacheLookupMany(t *testing.T) {
	r := newRand(t)
	d := mustOpenDB(t, t.TempDir(), testRepo)
	defer d.Close()
	gen, _ := d.FileCacheGen()
	stored := map[string]blob.ID{}
	var recs []index.FileCacheRecord
	for dir := range 40 {
		prefix := randID(r)
		for range r.IntN(300) {
			k := append(prefix[:16:16], randID(r).String()[:16]...)
			seal := randID(r)
			stored[string(k)] = seal
			recs = append(recs, index.FileCacheRecord{Path: k, Entry: index.FileEntry{Size: uint64(dir), Gen: gen, Seal: seal, Content: []blob.ID{randID(r)}}})
		}
	}
	if err := d.FileCachePut("ws", recs); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		var q []index.FileCacheQuery
		for _, rec := range recs {
			switch r.IntN(3) {
			case 0:
				q = append(q, index.FileCacheQuery{Key: rec.Path})
			case 1: // absent, just after a stored key
				q = append(q, index.FileCacheQuery{Key: append(bytes.Clone(rec.Path), 0)})
			}
		}
		r.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
		if err := d.FileCacheLookup("ws", blob.Workspace, q); err != nil {
			t.Fatal(err)
		}
		for _, x := range q {
			seal, ok := stored[string(x.Key)]
			if x.Found != ok || (ok && x.Entry.Seal != seal) {
				t.Fatalf("key %x: found %v, stored %v", x.Key, x.Found, ok)
			}
		}
	}
}
