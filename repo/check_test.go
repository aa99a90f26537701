package repo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/pack"
)

func TestCheckFindsDamage(t *testing.T) {
	tr, r := openNewTestRepo(t)
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
	_, r := openNewTestRepo(t)
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
	tr, r := openNewTestRepo(t)
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

// With the local index warm (every index object applied), an index
// object flipped or truncated in the repository is still seen by Check,
// which does not read the cache: every Check loads each one from the
// repository, names the damaged one, and rebuilds the cache without it;
// put back intact, Check is clean again.
func TestCheckReadsStoredIndexObjects(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	blobs := randomBlobs(t, 311, 12, 60<<10)
	ids := saveAll(t, r, blob.Workspace, blobs)
	checkRepo(t, r)
	objs, _ := filepath.Glob(filepath.Join(tr.dir, "index", "*"))
	if len(objs) == 0 {
		t.Fatal("no index objects")
	}
	for _, path := range objs {
		name := filepath.Base(path)
		orig, err := os.ReadFile(path)
		must(t, err)
		for what, damaged := range map[string][]byte{
			"flipped":   append(append([]byte(nil), orig[:len(orig)/2]...), append([]byte{orig[len(orig)/2] ^ 0x40}, orig[len(orig)/2+1:]...)...),
			"truncated": orig[:len(orig)-7],
		} {
			must(t, os.WriteFile(path, damaged, 0o600))
			for _, o := range []CheckOptions{{}, {ReadData: true}} {
				res, err := r.Check(ctx, o)
				must(t, err)
				if len(res.Problems) == 0 || res.Problems[0].Kind != "index_damaged" || res.Problems[0].Object != "index/"+name {
					t.Fatalf("index/%s %s, check %+v with the cache warm: problems %+v", name[:8], what, o, res.Problems)
				}
				if got := r.DamagedIndex(); len(got) != 1 || got[0].String() != name {
					t.Fatalf("DamagedIndex after check = %v", got)
				}
			}
			must(t, os.WriteFile(path, orig, 0o600))
			checkRepo(t, r)
		}
	}
	checkAll(t, r, blob.Workspace, ids, blobs)
}

// copyPack stores the blobs of pack p again in a new pack, indexed by a
// new index object, as a second session or a prune's copy would, and
// returns the new pack's id. Its places take the blobs over (the pack is
// stored and applied last).
func copyPack(t *testing.T, r *Repository, p blob.ID) blob.ID {
	t.Helper()
	ctx := context.Background()
	w, err := r.NewPack(blob.Workspace)
	must(t, err)
	must(t, r.Index().ForEachBlob(blob.Workspace, func(l index.Location) error {
		if l.Pack != p {
			return nil
		}
		sealed, err := r.Backend().Load(ctx, backend.Handle{Type: backend.Pack, Name: p.String()}, int64(l.Offset), int(l.Length))
		if err != nil {
			return err
		}
		return w.Add(l.Entry, sealed)
	}))
	info, err := r.SavePack(ctx, w)
	must(t, err)
	_, err = r.SaveIndex(ctx, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{info}})
	must(t, err)
	return info.ID
}

// A blob with several places is read from another when
// its pack is damaged or missing; check calls a missing pack whose every
// blob is stored elsewhere a stale index object (a notice naming it, not
// damage), and the lookups move to the stored copy.
func TestBlobCopiesFallBack(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	blobs := randomBlobs(t, 316, 6, 30<<10)
	ids := saveAll(t, r, blob.Workspace, blobs)
	first, _, err := r.LookupBlob(blob.Workspace, blob.Data, ids[0])
	must(t, err)
	var inFirst []int
	for i, id := range ids {
		if l, _, _ := r.LookupBlob(blob.Workspace, blob.Data, id); l.Pack == first.Pack {
			inFirst = append(inFirst, i)
		}
	}
	second := copyPack(t, r, first.Pack)
	objs, _ := filepath.Glob(filepath.Join(tr.dir, "index", "*"))
	for _, i := range inFirst {
		locs, err := r.Index().LookupAll(blob.Workspace, blob.Data, ids[i])
		if err != nil || len(locs) != 2 || locs[0].Pack != second || locs[1].Pack != first.Pack {
			t.Fatalf("places of blob %d: %+v %v; want the copy, then the first pack", i, locs, err)
		}
	}
	checkRepo(t, r)

	// The copy damaged: every blob still loads, from the first pack.
	secondPath := filepath.Join(tr.dir, "data", second.String()[:2], second.String())
	b, err := os.ReadFile(secondPath)
	must(t, err)
	for i := 0; i < len(b)-64; i += 512 {
		b[i] ^= 0x08
	}
	must(t, os.WriteFile(secondPath, b, 0o600))
	checkAll(t, r, blob.Workspace, ids, blobs)

	// The copy gone, and its index object a stale one: a notice, no problem.
	must(t, os.Remove(secondPath))
	checkAll(t, r, blob.Workspace, ids, blobs)
	res, err := r.Check(ctx, CheckOptions{ReadData: true})
	must(t, err)
	if len(res.Problems) != 0 {
		t.Fatalf("a missing copy whose blobs are stored elsewhere is reported as damage: %+v", res.Problems)
	}
	var stale []Problem
	for _, n := range res.Notices {
		if n.Kind == "index_stale" {
			stale = append(stale, n)
		}
	}
	now, _ := filepath.Glob(filepath.Join(tr.dir, "index", "*"))
	if len(stale) != 1 || !strings.Contains(stale[0].Detail, "data/"+second.String()) || len(now) != len(objs) ||
		!slices.ContainsFunc(now, func(p string) bool { return "index/"+filepath.Base(p) == stale[0].Object }) {
		t.Fatalf("notices %+v: want one index_stale naming the copy's index object and pack", res.Notices)
	}
	for _, i := range inFirst {
		if l, _, err := r.LookupBlob(blob.Workspace, blob.Data, ids[i]); err != nil || l.Pack != first.Pack {
			t.Fatalf("after check, blob %d is looked up in %s (%v), not the stored pack", i, l.Pack.Short(), err)
		}
	}

	// The first pack gone too: now the blobs are lost, and check says so.
	must(t, os.Remove(filepath.Join(tr.dir, "data", first.Pack.String()[:2], first.Pack.String())))
	if _, err := r.LoadBlob(ctx, blob.Workspace, blob.Data, ids[inFirst[0]], nil); !errors.Is(err, ErrPackMissing) || !strings.Contains(err.Error(), "1 other places") {
		t.Fatalf("a blob with every place gone: %v", err)
	}
	res, err = r.Check(ctx, CheckOptions{})
	must(t, err)
	if len(res.Problems) != 2 || res.Problems[0].Kind != "pack_missing" || res.Problems[1].Kind != "pack_missing" {
		t.Fatalf("both packs gone: problems %+v, want two pack_missing", res.Problems)
	}
}
