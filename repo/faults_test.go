package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
	"lifeboat/pack"
)

// onePack saves one blob, flushes, and returns its id and pack path.
func onePack(t *testing.T, tr *testRepo, r *Repository) (blob.ID, []byte, string) {
	t.Helper()
	data := randomBlobs(t, 9, 1, 100<<10)[0]
	id := saveAll(t, r, blob.Workspace, [][]byte{data})[0]
	loc, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id)
	if err != nil || !ok {
		t.Fatalf("lookup: %v %v", ok, err)
	}
	return id, data, filepath.Join(tr.dir, "data", loc.Pack.String()[:2], loc.Pack.String())
}

func TestDamagedPacks(t *testing.T) {
	cases := map[string]struct {
		damage func(t *testing.T, path string)
		want   error
	}{
		"truncated": {func(t *testing.T, p string) { must(t, os.Truncate(p, 100)) }, ErrCorrupt},
		"bit flipped": {func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			must(t, err)
			b[40] ^= 0x10
			must(t, os.WriteFile(p, b, 0o600))
		}, ErrCorrupt},
		"missing": {func(t *testing.T, p string) { must(t, os.Remove(p)) }, ErrPackMissing},
		"renamed": {func(t *testing.T, p string) {
			must(t, os.Rename(p, filepath.Join(filepath.Dir(p), "00"+filepath.Base(p)[2:])))
		}, ErrPackMissing},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tr, r := openNewTestRepo(t)
			id, _, path := onePack(t, tr, r)
			c.damage(t, path)
			_, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, id, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			t.Logf("error: %v", err)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A pack whose bytes were swapped for another pack's fails: the blob's
// additional data binds its id.
func TestSwappedPackContent(t *testing.T) {
	tr, r := openNewTestRepo(t)
	id1, _, p1 := onePack(t, tr, r)
	data2 := randomBlobs(t, 10, 1, 100<<10)[0]
	id2 := saveAll(t, r, blob.Workspace, [][]byte{data2})[0]
	loc2, _, _ := r.LookupBlob(blob.Workspace, blob.Data, id2)
	b2, err := os.ReadFile(filepath.Join(tr.dir, "data", loc2.Pack.String()[:2], loc2.Pack.String()))
	must(t, err)
	must(t, os.WriteFile(p1, b2, 0o600))
	if _, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, id1, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v", err)
	}
}

// An index object that names a pack that does not exist: loads fail with a
// clear error, and repair index drops the entry.
func TestIndexNamesMissingPack(t *testing.T) {
	_, r := openNewTestRepo(t)
	ctx := context.Background()
	k, _ := r.TierKeys(blob.Workspace)
	ghost := k.BlobID([]byte("ghost"))
	o := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{{ID: blob.ID{1, 2, 3}, Size: 4096,
		Entries: []pack.Entry{{Type: blob.Data, ID: ghost, Offset: 0, Length: 100, PlainLen: 60}}}}}
	if _, err := r.saveIndexObject(ctx, blob.Workspace, o); err != nil {
		t.Fatal(err)
	}
	_, err := r.LoadBlob(ctx, blob.Workspace, blob.Data, ghost, nil)
	if !errors.Is(err, ErrPackMissing) {
		t.Fatalf("got %v, want ErrPackMissing", err)
	}
	if _, err := r.RepairIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadBlob(ctx, blob.Workspace, blob.Data, ghost, nil); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("after repair: %v, want ErrBlobNotFound", err)
	}
}

// A full disk while a pack is saved: the error says so, nothing partial is
// stored, earlier data stays readable, and a later flush works.
func TestFullDiskDuringSave(t *testing.T) {
	tr := newTestRepo(t)
	fb := fault.Wrap(tr.be)
	r := tr.open(t, fb, testPassword)
	first := randomBlobs(t, 11, 5, 50<<10)
	ids := saveAll(t, r, blob.Workspace, first)
	fb.Add(fault.OnSave).Match(backend.Pack).Fail(backend.ErrNoSpace)
	more := randomBlobs(t, 12, 5, 50<<10)
	for _, b := range more {
		if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Flush(context.Background())
	if !errors.Is(err, backend.ErrNoSpace) {
		t.Fatalf("flush: %v, want ErrNoSpace", err)
	}
	fb.VerifyAllFired(t)
	_ = r.Close(context.Background())

	r2 := tr.open(t, nil, testPassword)
	checkAll(t, r2, blob.Workspace, ids, first)
	ids2 := saveAll(t, r2, blob.Workspace, more)
	checkAll(t, r2, blob.Workspace, ids2, more)
	checkRepo(t, r2)
}

// A failure to save the index object after the packs: the packs are
// orphans, not damage; repair index recovers their blobs.
func TestIndexSaveFails(t *testing.T) {
	tr := newTestRepo(t)
	fb := fault.Wrap(tr.be)
	r := tr.open(t, fb, testPassword)
	blobs := randomBlobs(t, 13, 5, 50<<10)
	fb.Add(fault.OnSave).Match(backend.Index).Fail(nil)
	for _, b := range blobs {
		if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(context.Background()); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("flush: %v", err)
	}
	_ = r.Close(context.Background())
	r2 := tr.open(t, nil, testPassword)
	st, err := r2.RepairIndex(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Blobs != len(blobs) {
		t.Fatalf("repair indexed %d blobs, want %d", st.Blobs, len(blobs))
	}
	k, _ := r2.TierKeys(blob.Workspace)
	ids := make([]blob.ID, len(blobs))
	for i, b := range blobs {
		ids[i] = k.BlobID(b)
	}
	checkAll(t, r2, blob.Workspace, ids, blobs)
	checkRepo(t, r2)
}

func TestBadKeyFiles(t *testing.T) {
	tr := newTestRepo(t)
	ctx := context.Background()
	// A file in keys/ that is not a key file does not stop a good key.
	junk := []byte("not a key")
	junkName := "00" + (blob.ID{}).String()[2:]
	must(t, tr.be.Save(ctx, backend.Handle{Type: backend.Key, Name: junkName}, junk))
	tr.open(t, nil, testPassword)
	// With only junk left, open says no key could be read.
	var names []string
	must(t, tr.be.List(ctx, backend.Key, func(fi backend.FileInfo) error { names = append(names, fi.Name); return nil }))
	for _, n := range names {
		if n != junkName {
			must(t, tr.be.Remove(ctx, backend.Handle{Type: backend.Key, Name: n}))
		}
	}
	_, err := Open(ctx, tr.be, testPassword, Options{CacheDir: tr.cache})
	if !errors.Is(err, ErrNoUsableKey) {
		t.Fatalf("got %v, want ErrNoUsableKey", err)
	}
	if errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatal("junk key reported as a wrong password")
	}
}
