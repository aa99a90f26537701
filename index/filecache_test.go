package index_test

import (
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
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{"short": make([]byte, 40), "ragged": make([]byte, 41+31), "flags": append(make([]byte, 40), 0x80)}
	err = bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("filecache")).Bucket([]byte("ws"))
		for k, v := range bad {
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
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

// FileCacheGetIndexed trusts an entry only when its chunks are indexed data
// blobs of the tier and add up to its size.
func TestFileCacheGetIndexed(t *testing.T) {
	r := newRand(t)
	d := mustOpenDB(t, t.TempDir(), testRepo)
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
	good := index.FileEntry{Dev: 1, Inode: 2, Size: uint64(data[0].PlainLen) + uint64(data[1].PlainLen),
		Content: []blob.ID{data[0].ID, data[1].ID}}
	missing := good
	missing.Content = []blob.ID{data[0].ID, randID(r)}
	wrongSize := good
	wrongSize.Size++
	empty := good
	empty.Content, empty.Size = nil, 0
	recs := []index.FileCacheRecord{{Path: []byte("good"), Entry: good}, {Path: []byte("missing"), Entry: missing},
		{Path: []byte("size"), Entry: wrongSize}, {Path: []byte("empty"), Entry: empty}}
	if err := d.FileCachePut("ws", recs); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		tier blob.Tier
		want bool
	}{{"good", blob.Workspace, true}, {"good", blob.Sensitive, false}, {"missing", blob.Workspace, false},
		{"size", blob.Workspace, false}, {"empty", blob.Workspace, false}, {"absent", blob.Workspace, false}} {
		e, ok, err := d.FileCacheGetIndexed("ws", []byte(c.path), c.tier)
		if err != nil || ok != c.want {
			t.Errorf("%s in %s: ok %v (%v), want %v", c.path, c.tier, ok, err, c.want)
		}
		if ok && !slices.Equal(e.Content, good.Content) {
			t.Errorf("%s: content %v", c.path, e.Content)
		}
	}
}
