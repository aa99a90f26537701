package repo

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/pack"
)

func TestCheckFindsDamage(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	saveAll(t, r, blob.Workspace, randomBlobs(t, 30, 20, 100<<10))
	saveAll(t, r, blob.Sensitive, randomBlobs(t, 31, 5, 100<<10))
	checkRepo(t, r)

	_, _, path := onePack(t, tr, r)
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)/3] ^= 1
	must(t, os.WriteFile(path, b, 0o600))
	res, err := r.Check(context.Background(), CheckOptions{})
	must(t, err)
	if len(res.Problems) != 0 {
		t.Fatalf("a flipped bit inside a blob is invisible without --read-data, got %+v", res.Problems)
	}
	res, err = r.Check(context.Background(), CheckOptions{ReadData: true})
	must(t, err)
	if len(res.Problems) != 1 || res.Problems[0].Kind != "pack_damaged" {
		t.Fatalf("read-data found %+v, want one damaged pack", res.Problems)
	}
	must(t, os.Remove(path))
	res, err = r.Check(context.Background(), CheckOptions{})
	must(t, err)
	if len(res.Problems) != 1 || res.Problems[0].Kind != "pack_missing" {
		t.Fatalf("found %+v, want one missing pack", res.Problems)
	}
}

// An index entry that points a blob at another blob's bytes (a lying but
// well-formed index object) is caught by check --read-data.
func TestCheckFindsWrongIndexEntry(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	ids := saveAll(t, r, blob.Workspace, randomBlobs(t, 5, 4, 10000))
	loc1, _, err := r.LookupBlob(blob.Workspace, blob.Data, ids[1])
	must(t, err)
	var size uint32
	must(t, r.Index().ForEachPack(func(id blob.ID, _ blob.Tier, s uint32) error {
		if id == loc1.Pack {
			size = s
		}
		return nil
	}))
	lie := loc1.Entry
	lie.ID = ids[0]
	o := &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{{ID: loc1.Pack, Size: size, Entries: []pack.Entry{lie}}}}
	_, err = r.saveIndexObject(ctx, blob.Workspace, o)
	must(t, err)
	// The lie is the blob's place now; its true place is kept as a copy,
	// which LoadBlob falls back to when the lie does not verify.
	if loc, _, err := r.LookupBlob(blob.Workspace, blob.Data, ids[0]); err != nil || loc.Entry != lie {
		t.Fatalf("the lying entry did not take the blob over: %+v %v", loc, err)
	}
	if _, err := r.LoadBlob(ctx, blob.Workspace, blob.Data, ids[0], nil); err != nil {
		t.Fatalf("the blob's true place was not tried after the lie: %v", err)
	}
	res, err := r.Check(ctx, CheckOptions{ReadData: true})
	must(t, err)
	found := false
	for _, p := range res.Problems {
		found = found || p.Kind == "index_entry"
	}
	if !found {
		t.Fatalf("check --read-data missed the lying index entry: %+v", res.Problems)
	}
}

// A damaged index object does not stop the repository from opening; check
// reports it and repair index replaces it.
func TestDamagedIndexObject(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	r := tr.open(t, nil, testPassword)
	blobs := randomBlobs(t, 6, 6, 50000)
	ids := saveAll(t, r, blob.Workspace, blobs)
	must(t, r.Close(ctx))
	objs, _ := filepath.Glob(filepath.Join(tr.dir, "index", "*"))
	if len(objs) == 0 {
		t.Fatal("no index objects")
	}
	b, err := os.ReadFile(objs[0])
	must(t, err)
	b[len(b)/2] ^= 4
	must(t, os.WriteFile(objs[0], b, 0o600))
	tr.cache = t.TempDir()
	r2 := tr.open(t, nil, testPassword)
	res, err := r2.Check(ctx, CheckOptions{})
	must(t, err)
	if len(res.Problems) == 0 || res.Problems[0].Kind != "index_damaged" {
		t.Fatalf("check: %+v", res.Problems)
	}
	st, err := r2.RepairIndex(ctx)
	must(t, err)
	if st.Blobs != len(ids) {
		t.Fatalf("repair indexed %d blobs, want %d", st.Blobs, len(ids))
	}
	checkAll(t, r2, blob.Workspace, ids, blobs)
	checkRepo(t, r2)
}
