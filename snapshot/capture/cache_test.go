package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// A record decodes to what was encoded: names, every field, one chunk
// or many; and every truncation, a wrong version, names out of order or
// repeated, an entry without chunks, unknown flags and trailing bytes
// are refused without a panic.
func TestCapRecord(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	var names [][]byte
	var entries []*capEntry
	for i := range 50 {
		e := &capEntry{Dev: rng.Uint64(), Inode: rng.Uint64(), Size: rng.Uint64(), MtimeNs: int64(rng.Uint64()),
			CtimeNs: -int64(rng.Uint64() >> 1), Xattrs: i%3 == 0}
		for range 1 + rng.IntN(4) {
			var id blob.ID
			binary.LittleEndian.PutUint64(id[:], rng.Uint64())
			e.Content = append(e.Content, id)
		}
		names = append(names, []byte(fmt.Sprintf("name %03d \xff", i)))
		entries = append(entries, e)
	}
	tree := blob.ID{9, 8, 7}
	rec := appendRecord(nil, 77, tree, names, entries)
	check := func(what string, rec []byte, wantTree blob.ID) {
		t.Helper()
		gen, gotTree, got, err := decodeRecord(rec)
		if err != nil || gen != 77 || gotTree != wantTree || len(got) != len(entries) {
			t.Fatalf("%s: decode: gen %d, tree %s, %d entries, %v", what, gen, gotTree.Short(), len(got), err)
		}
		for i := range got {
			if !bytes.Equal(got[i].name, names[i]) || !reflect.DeepEqual(got[i].e, *entries[i]) {
				t.Fatalf("%s: entry %d: %q %+v, want %q %+v", what, i, got[i].name, got[i].e, names[i], *entries[i])
			}
		}
	}
	check("version 2", rec, tree)
	// Version 1, written before the tree id: the same without it.
	v1 := append([]byte{capRecordVersionV1}, rec[1:9]...)
	v1 = append(v1, rec[9+blob.IDSize:]...)
	check("version 1", v1, blob.ID{})
	if _, _, got, err := decodeRecord(appendRecord(nil, 1, blob.ID{}, nil, nil)); err != nil || len(got) != 0 {
		t.Errorf("empty record: %d entries, %v", len(got), err)
	}
	for _, r := range [][]byte{rec, v1} {
		for n := range len(r) {
			if _, _, _, err := decodeRecord(r[:n]); err == nil {
				t.Fatalf("version %d record cut to %d of %d bytes decodes", r[0], n, len(r))
			}
		}
	}
	bad := map[string][]byte{
		"version":    append([]byte{3}, rec[1:]...),
		"trailing":   append(slices.Clone(rec), 0),
		"order":      appendRecord(nil, 1, tree, [][]byte{names[1], names[0]}, entries[:2]),
		"repeated":   appendRecord(nil, 1, tree, [][]byte{names[0], names[0]}, entries[:2]),
		"no chunk":   appendRecord(nil, 1, tree, names[:1], []*capEntry{{Size: 1}}),
		"empty name": appendRecord(nil, 1, tree, [][]byte{{}}, entries[:1]),
	}
	flags := appendRecord(nil, 1, tree, [][]byte{{'a'}}, entries[1:2]) // not Xattrs
	flags[len(flags)-blob.IDSize*len(entries[1].Content)-2] = 4
	bad["flags"] = flags
	for name, b := range bad {
		if _, _, _, err := decodeRecord(b); err == nil {
			t.Errorf("%s: decodes", name)
		}
	}
}

// Arbitrary bytes never make decodeRecord panic, a record it accepts has
// no entry without a name or chunks, and it encodes back to the same
// bytes (a version 1 record to the same bytes after its header, which
// version 2 extends with the tree id).
func FuzzDecodeRecord(f *testing.F) {
	v2 := appendRecord(nil, 5, blob.ID{4}, [][]byte{[]byte("a"), []byte("b")}, []*capEntry{
		{Size: 3, Content: []blob.ID{{1}}}, {Xattrs: true, Content: []blob.ID{{2}, {3}}}})
	f.Add(v2)
	f.Add(append(append([]byte{capRecordVersionV1}, v2[1:9]...), v2[9+blob.IDSize:]...))
	f.Add(appendRecord(nil, 0, blob.ID{}, nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		gen, tree, rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		if b[0] == capRecordVersionV1 {
			if !tree.IsNull() {
				t.Fatalf("version 1 record with tree %s", tree.Short())
			}
			b = append(append(append([]byte{capRecordVersion}, b[1:9]...), tree[:]...), b[9:]...)
		}
		var names [][]byte
		var entries []*capEntry
		for i := range rec {
			if len(rec[i].e.Content) == 0 || len(rec[i].name) == 0 {
				t.Fatalf("entry %d: name %q, %d chunks", i, rec[i].name, len(rec[i].e.Content))
			}
			names, entries = append(names, rec[i].name), append(entries, &rec[i].e)
		}
		if again := appendRecord(nil, gen, tree, names, entries); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded record differs:\n%x\n%x", again, b)
		}
	})
}

// capSortByKey orders records by key: random keys, keys sharing their
// first half, equal leading bytes, none and one.
func TestCapSortByKey(t *testing.T) {
	t.Parallel()
	rng := seedtest.Rand(t)
	for _, n := range []int{0, 1, 2, 1000, 3*capChunk + 17} {
		var puts capChunked[capPut]
		for i := range n {
			var p capPut
			for w := 0; w+8 <= len(p.key); w += 8 {
				binary.LittleEndian.PutUint64(p.key[w:], rng.Uint64())
			}
			switch i % 4 {
			case 1: // same directory as the entry before
				copy(p.key[:16], puts.at(i - 1).key[:16])
			case 2: // same first two bytes only
				copy(p.key[:2], puts.at(i - 1).key[:2])
			}
			puts.add(p)
		}
		order := capSortByKey(&puts)
		if len(order) != n {
			t.Fatalf("n=%d: %d indexes", n, len(order))
		}
		seen := make([]bool, n)
		for j, i := range order {
			if seen[i] {
				t.Fatalf("n=%d: index %d twice", n, i)
			}
			seen[i] = true
			if j > 0 && bytes.Compare(puts.at(int(order[j-1])).key[:], puts.at(int(i)).key[:]) > 0 {
				t.Fatalf("n=%d: keys out of order at %d", n, j)
			}
		}
	}
}

// capTestCacheEntry returns the file cache entry of file rel (a slash
// path below the root) of workspace ws from its directory's records, with
// the record's removal generation.
func capTestCacheEntry(t testing.TB, r *repo.Repository, ws, rel string) (e capEntry, gen uint64, ok bool) {
	t.Helper()
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	wsKey, dir := capCacheKeys(k, ws)
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		dir = capChildKey(k, dir, p)
	}
	name := parts[len(parts)-1]
	for part := 0; ; part++ {
		key := capPartKey(dir, part)
		var sealed []byte
		if err := r.Index().FileCacheGet(wsKey, key[:], func(v []byte) { sealed = slices.Clone(v) }); err != nil {
			t.Fatal(err)
		}
		if sealed == nil {
			return capEntry{}, 0, false
		}
		plain, err := k.Open(nil, sealed, capRecordAAD(wsKey, key[:]))
		if err != nil {
			t.Fatalf("%s: record %d does not open: %v", rel, part, err)
		}
		gen, _, rec, err := decodeRecord(plain)
		if err != nil {
			t.Fatalf("%s: record %d: %v", rel, part, err)
		}
		for _, n := range rec {
			if string(n.name) == name {
				return n.e, gen, true
			}
		}
	}
}

// capTestCached returns how many of files (slash paths below the root)
// have a file cache entry in workspace ws.
func capTestCached(t testing.TB, r *repo.Repository, ws string, files map[string]string) int {
	t.Helper()
	n := 0
	for p := range files {
		if _, _, ok := capTestCacheEntry(t, r, ws, filepath.ToSlash(p)); ok {
			n++
		}
	}
	return n
}

// capTestCountingCache counts the records a capture writes.
type capTestCountingCache struct {
	*index.DB
	puts atomic.Int64
}

func (c *capTestCountingCache) FileCachePut(ws string, recs []index.FileCacheRecord) error {
	c.puts.Add(int64(len(recs)))
	return c.DB.FileCachePut(ws, recs)
}

// capTestCountingSetup opens a repository and capture options with a
// read counter whose file cache, the repository's index, counts the
// records it is given.
func capTestCountingSetup(t *testing.T) (*repo.Repository, Options, *atomic.Int64, *capTestCountingCache) {
	t.Helper()
	r := capTestOpenRepo(t)
	read := new(atomic.Int64)
	o := capTestOptions(read)
	cache := &capTestCountingCache{DB: r.Index()}
	o.Cache = cache
	return r, o, read, cache
}

// The file cache keeps a record per part of a directory: a capture writes
// those of new or changed parts only, a directory that is gone loses its
// record, and a directory of more than MaxNodesPerBlob entries has one
// record per part, whose files, shifted across a part boundary by a new
// name, are read again (and only they).
func TestCacheRecordsPerPart(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	for i := range snapshot.MaxNodesPerBlob + 10 {
		files[fmt.Sprintf("big/f%05d", i)] = fmt.Sprintf("file %d\n", i)
	}
	for _, d := range []string{"a", "b", "c/d"} {
		for i := range 3 {
			files[fmt.Sprintf("%s/f%d", d, i)] = d + strconv.Itoa(i)
		}
	}
	capTestWrite(t, root, files)
	capTestAge(t, root)
	r, o, read, cache := capTestCountingSetup(t)
	records := func() int { t.Helper(); return capTestRecordCount(t, r, o.Workspace) }
	capture := func(step string, wantRead int64, wantPuts int64, wantRecords int) {
		t.Helper()
		read.Store(0)
		cache.puts.Store(0)
		m := capTestCapture(t, r, root, o)
		if read.Load() != wantRead || cache.puts.Load() != wantPuts || records() != wantRecords {
			t.Errorf("%s: read %d bytes, wrote %d records, holds %d; want %d, %d, %d", step,
				read.Load(), cache.puts.Load(), records(), wantRead, wantPuts, wantRecords)
		}
		capTestCompare(t, r, root, m)
	}
	var total int64
	for _, c := range files {
		total += int64(len(c))
	}
	// big's two parts, a, b and c/d (c holds no file: no record).
	capture("first capture", total, 5, 5)
	capture("unchanged", 0, 0, 5)

	capTestWrite(t, root, map[string]string{"a/f1": "changed"})
	capture("a changed", int64(len("changed")), 1, 5)
	capTestAge(t, root) // a/f1 is now old enough to cache, and every ctime moved
	read.Store(0)
	capTestCapture(t, r, root, o)

	if err := os.RemoveAll(filepath.Join(root, "b")); err != nil {
		t.Fatal(err)
	}
	capture("b removed", 0, 0, 4)

	// A name sorting first: big's last name of part 0 moves to part 1.
	capTestWrite(t, root, map[string]string{"big/e0": "new first"})
	capTestAge(t, root)
	read.Store(0)
	capTestCapture(t, r, root, o) // capTestAge moved every ctime: all read
	capture("settled", 0, 0, 4)
	capTestWrite(t, root, map[string]string{"big/e1": "new second"})
	shifted := files[fmt.Sprintf("big/f%05d", snapshot.MaxNodesPerBlob-2)]
	// e1 is read (new), and the old name it pushed from part 0 into part
	// 1, which is not in part 1's record; both parts are written again.
	capture("shifted", int64(len("new second")+len(shifted)), 2, 4)
}

// capTestRecordCount returns the number of file cache records of
// workspace ws.
func capTestRecordCount(t testing.TB, r *repo.Repository, ws string) int {
	t.Helper()
	n, err := r.Index().FileCacheCount(capTestWsKey(t, r, ws))
	if err != nil {
		t.Fatal(err)
	}
	return n
}
