package index_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
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
		if err := d.Apply(randID(r), o); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, objs
}

// checkWorks asserts that a DB opened over a damaged file is usable: it
// syncs, looks up, and survives a reopen. It was reset, unless intact is
// set: damage bbolt never reads (a free page) leaves the old entries.
func checkWorks(t *testing.T, r *rand.Rand, dir string, d *index.DB, intact []*index.Object) {
	t.Helper()
	if d.Private() {
		t.Fatal("DB opened over a damaged file is private")
	}
	src := newFakeSource()
	src.objs[randID(r)] = randObject(r, blob.Sensitive, 3, 10)
	if _, err := d.Sync(context.Background(), src); err != nil {
		t.Fatalf("Sync: %v", err)
	}
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
	checkDB(t, d, locations(append(intact, src.all()...)...))
}

func TestOpenDBCorruptFile(t *testing.T) {
	r := newRand(t)
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	cases := map[string]func(t *testing.T, b []byte) []byte{
		"all garbage":            func(t *testing.T, b []byte) []byte { return garbage(len(b)) },
		"short garbage":          func(t *testing.T, b []byte) []byte { return garbage(100) },
		"garbage over the metas": func(t *testing.T, b []byte) []byte { copy(b, garbage(8192)); return b },
		"zeroed metas":           func(t *testing.T, b []byte) []byte { clear(b[:8192]); return b },
		"text":                   func(t *testing.T, b []byte) []byte { return []byte("this is not a bbolt file\n") },
	}
	for _, n := range []int{0, 1, 100, 4095, 4096, 8191, 8192, 12288, -3, -2, -1} {
		cases[truncName(n)] = func(t *testing.T, b []byte) []byte {
			switch {
			case n >= 0 && n < len(b):
				return b[:n]
			case n < 0:
				return b[:len(b)*(4+n)/4] // -1: three quarters, -3: a quarter
			}
			t.Fatalf("file of %d bytes is too small for truncation to %d", len(b), n)
			return nil
		}
	}
	// Whole pages of garbage past the metas: every page bbolt reaches
	// first identifies itself, so a garbage page header is caught.
	cases["garbage over one data page"] = func(t *testing.T, b []byte) []byte {
		pg := 2 + r.IntN(len(b)/4096-2)
		copy(b[pg*4096:], garbage(4096))
		return b
	}
	cases["garbage over the root pages"] = func(t *testing.T, b []byte) []byte {
		copy(b[2*4096:], garbage(8*4096))
		return b
	}
	cases["garbage over all data pages"] = func(t *testing.T, b []byte) []byte {
		copy(b[2*4096:], garbage(len(b)-2*4096))
		return b
	}
	cases["truncated by one page"] = func(t *testing.T, b []byte) []byte { return b[:len(b)-4096] }
	cases["truncated by one byte"] = func(t *testing.T, b []byte) []byte { return b[:len(b)-1] }
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir, objs := filledDB(t, r)
			path := filepath.Join(dir, "index.db")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, damage(t, b), 0o600); err != nil {
				t.Fatal(err)
			}
			d, err := index.OpenDB(dir, testRepo)
			if err != nil {
				t.Fatalf("OpenDB over a damaged file: %v", err)
			}
			var intact []*index.Object
			if blobs, _, _ := d.Count(); blobs > 0 {
				// Damage bbolt never reads leaves the DB intact: a free page,
				// or file space past the high-water mark (bbolt grows the
				// file ahead of its pages).
				if name != "garbage over one data page" && !strings.HasPrefix(name, "truncated by one") {
					t.Fatalf("DB opened over damage (%s) kept %d entries", name, blobs)
				}
				intact = objs
			}
			checkWorks(t, r, dir, d, intact)
		})
	}
}

func truncName(n int) string {
	switch n {
	case -1:
		return "truncated to three quarters"
	case -2:
		return "truncated to half"
	case -3:
		return "truncated to a quarter"
	}
	return "truncated to " + itoa(n)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
