package index_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
	"lifeboat/pack"
)

// filledDB creates a closed DB in a new directory holding a few thousand
// entries, so its file spans many pages, and returns the directory and
// the objects it holds.
func filledDB(t *testing.T, r *rand.Rand) (string, []*index.Object) {
	t.Helper()
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	var objs []*index.Object
	for range 4 {
		o := randObject(r, blob.Workspace, 40, 40)
		objs = append(objs, o)
		mustApply(t, r, d, o)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, objs
}

// checkWorks asserts that a DB opened over a damaged file is usable: it
// syncs as the repository does (which drops whatever survived of the old
// objects, as the source does not list them), looks up, and survives a
// reopen.
func checkWorks(t *testing.T, r *rand.Rand, dir string, d *index.DB) {
	t.Helper()
	if d.Private() {
		t.Fatal("DB opened over a damaged file is private")
	}
	src := newFakeSource()
	src.objs[randID(r)] = randObject(r, blob.Sensitive, 3, 10)
	d = syncAsRepo(t, dir, d, src)
	for _, p := range src.all()[0].Packs {
		for _, e := range p.Entries {
			if _, ok, err := d.Lookup(blob.Sensitive, e.Type, e.ID); !ok || err != nil {
				t.Fatalf("Lookup after Sync = %v, %v", ok, err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	checkDB(t, d, locations(src.all()...))
}

// syncAsRepo syncs d as repo.SyncIndex does: a Sync that finds the file
// damaged (ErrCorrupt) has had it removed, so the DB is reopened, empty,
// and synced again. It returns the DB synced.
func syncAsRepo(t *testing.T, dir string, d *index.DB, src index.Source) *index.DB {
	t.Helper()
	_, err := d.Sync(context.Background(), src)
	if errors.Is(err, index.ErrCorrupt) {
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		d = mustOpenDB(t, dir, testRepo)
		_, err = d.Sync(context.Background(), src)
	}
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return d
}

// usedSize returns how many bytes of the DB file at path hold pages (the
// high-water mark); bbolt grows the file ahead of it.
func usedSize(t *testing.T, path string) int {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var n int64
	if err := bdb.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil }); err != nil {
		t.Fatal(err)
	}
	return int(n)
}

func TestOpenDBCorruptFile(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	const page = 4096
	// Each case damages the file b whose pages end at used. Cases marked
	// mayKeep may leave the DB intact: damage bbolt never reads.
	type damage struct {
		fn      func(b []byte, used int) []byte
		mayKeep bool
	}
	cases := map[string]damage{
		"all garbage":            {fn: func(b []byte, _ int) []byte { return garbage(len(b)) }},
		"short garbage":          {fn: func([]byte, int) []byte { return garbage(100) }},
		"garbage over the metas": {fn: func(b []byte, _ int) []byte { copy(b, garbage(2*page)); return b }},
		"zeroed metas":           {fn: func(b []byte, _ int) []byte { clear(b[:2*page]); return b }},
		"text":                   {fn: func([]byte, int) []byte { return []byte("this is not a bbolt file\n") }},
		// Whole pages of garbage past the metas: bbolt checks that each page
		// it reaches names itself, so a garbage page header is caught. The
		// first pages may all be free by now.
		"garbage over the root pages": {mayKeep: true, fn: func(b []byte, _ int) []byte { copy(b[2*page:], garbage(8*page)); return b }},
		"garbage over all data pages": {fn: func(b []byte, used int) []byte { copy(b[2*page:], garbage(used-2*page)); return b }},
		"garbage over one data page": {mayKeep: true, fn: func(b []byte, used int) []byte { // it may be a free page
			copy(b[(2+r.IntN(used/page-2))*page:], garbage(page))
			return b
		}},
		"truncated past the used pages": {mayKeep: true, fn: func(b []byte, used int) []byte { return b[:used] }},
	}
	for _, n := range []int{0, 1, 100, page - 1, page, 2*page - 1, 2 * page, 3 * page} {
		cases["truncated to "+strconv.Itoa(n)] = damage{fn: func(b []byte, _ int) []byte { return b[:n] }}
	}
	for _, q := range []int{1, 2, 3} {
		cases["truncated to "+strconv.Itoa(q)+"/4 of the used pages"] = damage{fn: func(b []byte, used int) []byte { return b[:used*q/4] }}
	}
	cases["truncated by one page"] = damage{fn: func(b []byte, used int) []byte { return b[:used-page] }}
	cases["truncated by one byte"] = damage{fn: func(b []byte, used int) []byte { return b[:used-1] }}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, objs := filledDB(t, r)
			path := filepath.Join(dir, "index.db")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			used := usedSize(t, path)
			if used < 16*page || used > len(b) {
				t.Fatalf("test DB uses %d of %d bytes, want at least 16 pages", used, len(b))
			}
			if err := os.WriteFile(path, c.fn(b, used), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := index.OpenDB(dir, testRepo)
			if err != nil {
				t.Fatalf("OpenDB over a damaged file: %v", err)
			}
			// The open reads the meta pages, the free list and the
			// meta bucket; damage elsewhere shows in the first
			// transaction that reads it. Count reads every page of the
			// blobs and packs buckets.
			blobs, _, err := d.Count()
			switch {
			case errors.Is(err, index.ErrCorrupt):
				if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
					t.Fatalf("Count found damage (%v), but the file stays: %v", err, serr)
				}
			case err != nil:
				t.Fatalf("Count: %v", err)
			case blobs > 0:
				if !c.mayKeep {
					t.Fatalf("DB opened over damage kept %d entries", blobs)
				}
				checkDB(t, d, locations(objs...))
			}
			checkWorks(t, r, dir, d)
		})
	}
}

// A damaged page that the open does not read (a leaf of the blobs bucket)
// is found by the first lookup that reads it: ErrCorrupt, never a panic;
// the file is removed, Sync fails with ErrCorrupt, and the repository's
// reopen and Sync (syncAsRepo) rebuild a DB that answers.
func TestDamagedLeafFoundByLookup(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir, objs := filledDB(t, r)
	path := filepath.Join(dir, "index.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e pack.Entry
	var tier blob.Tier
	for _, o := range objs {
		for _, p := range o.Packs {
			if len(p.Entries) > 0 && tier == 0 {
				e, tier = p.Entries[0], o.Tier
			}
		}
	}
	if tier == 0 {
		t.Fatal("the test DB holds no blob")
	}
	const page = 4096
	hit := 0
	for off := 0; ; { // every page holding the key: its leaf, and older copies in free pages
		i := bytes.Index(b[off:], e.ID[:])
		if i < 0 {
			break
		}
		p := (off + i) / page * page
		for j := p; j < p+page; j++ {
			b[j] = byte(r.Uint32())
		}
		hit++
		off = p + page
	}
	if hit == 0 {
		t.Fatal("the blob's key is in no page of the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := index.OpenDB(dir, testRepo)
	if err != nil {
		t.Fatalf("OpenDB: %v", err)
	}
	if _, _, err := d.Lookup(tier, e.Type, e.ID); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Lookup through a damaged leaf = %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the damaged file stays: %v", err)
	}
	src := newFakeSource()
	for _, o := range objs {
		src.objs[randID(r)] = o
	}
	if _, err := d.Sync(context.Background(), src); !errors.Is(err, index.ErrCorrupt) {
		t.Fatalf("Sync of a DB found damaged = %v, want ErrCorrupt", err)
	}
	d = syncAsRepo(t, dir, d, src)
	defer d.Close()
	checkDB(t, d, locations(objs...))
}
