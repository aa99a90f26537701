package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/pack"
)

// oneSource is a Source of one index object, every pack of it stored.
type oneSource struct {
	id blob.ID
	o  *Object
}

func (s oneSource) ListIndex(ctx context.Context, fn func(blob.ID) error) error { return fn(s.id) }

func (s oneSource) LoadIndex(ctx context.Context, id blob.ID) (*Object, error) {
	if id != s.id {
		return nil, fmt.Errorf("no index object %s", id.Short())
	}
	return s.o, nil
}

func (s oneSource) PackStored(ctx context.Context, id blob.ID) (bool, error) { return true, nil }

func (s oneSource) ListPacks(ctx context.Context, fn func(blob.ID) error) error {
	for _, p := range s.o.Packs {
		if err := fn(p.ID); err != nil {
			return err
		}
	}
	return nil
}

// fuzzBase is the index object every FuzzCacheEntry DB starts with.
func fuzzBase() oneSource {
	p := PackInfo{ID: blob.ID{0xaa}, Size: 1000}
	for i := range 4 {
		p.Entries = append(p.Entries, pack.Entry{Type: blob.Type(1 + i%2), ID: blob.ID{byte(0x10 + i)}, Offset: uint32(100 * i), Length: 90, PlainLen: 50})
	}
	return oneSource{id: blob.ID{0x01}, o: &Object{Tier: blob.Workspace, Packs: []PackInfo{p}}}
}

// fuzzBuckets are the buckets FuzzCacheEntry writes into, by number.
var fuzzBuckets = [][]byte{bucketBlobs, bucketCopies, bucketPacks, bucketObjects, bucketMeta}

// FuzzCacheEntry writes one arbitrary entry into a bucket of a real index
// cache file (blobs, copies, packs, objects or meta: what damage, another
// program or an older lifeboat may leave there) and runs every reader the
// DB has over it. None may panic (which would take the whole file for
// damaged); an error must say the cache is corrupt
// (ErrCorrupt), which makes the repository rebuild it; an entry a decoder
// accepts encodes back to the same bytes; and a Verify, then a reopen,
// leave a DB that answers for the index object it was built from.
//
// CI runs the seeds below with every `go test`; to fuzz for longer:
//
//	go test ./index -run '^$' -fuzz FuzzCacheEntry -fuzztime 10m
func FuzzCacheEntry(f *testing.F) {
	base := fuzzBase()
	e := base.o.Packs[0].Entries[0]
	k := blobKey(blob.Workspace, e.Type, e.ID)
	v := appendLoc(nil, blob.ID{0xbb}, e)
	f.Add(uint8(0), k, v)                                   // a valid second place, as the blob's
	f.Add(uint8(1), appendCopyKey(bytes.Clone(k), k, v), v) // ... and as a copy
	f.Add(uint8(1), appendCopyKey(bytes.Clone(k), k, appendLoc(nil, blob.ID{0xcc}, e)), v)
	f.Add(uint8(0), k, v[:locSize-1])
	f.Add(uint8(0), k[:keySize-1], v)
	f.Add(uint8(1), k, v)
	f.Add(uint8(2), []byte{0xaa}, packValue(blob.Workspace, base.o.Packs[0]))
	f.Add(uint8(2), bytes.Repeat([]byte{0xaa}, blob.IDSize), []byte{1, 2, 3})
	f.Add(uint8(3), base.id[:], []byte{byte(blob.Workspace), objApplied})
	f.Add(uint8(3), base.id[:], []byte{objApplied})
	f.Add(uint8(3), bytes.Repeat([]byte{2}, blob.IDSize), []byte{byte(blob.Workspace), objPartial})
	f.Add(uint8(4), keyVersion, []byte{3, 0, 0})
	f.Add(uint8(4), keyRepo, []byte{1, 2})
	f.Add(uint8(4), keyRemovals, []byte{1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, which uint8, k, v []byte) {
		if len(k) == 0 || len(k) > bolt.MaxKeySize || len(v) > bolt.MaxValueSize {
			return // bbolt refuses to store these
		}
		checkDecoders(t, k, v)
		dir := t.TempDir()
		repoID := blob.ID{0x77}
		d, err := OpenDB(dir, repoID)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = d.Close() }()
		ctx := context.Background()
		if _, err := d.Sync(ctx, base); err != nil {
			t.Fatal(err)
		}
		bucket := fuzzBuckets[int(which)%len(fuzzBuckets)]
		if err := d.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(k, v) }); err != nil {
			t.Fatal(err)
		}
		corrupt := func(what string, err error) {
			t.Helper()
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: %v, not ErrCorrupt", what, err)
			}
			if d.damaged.Load() { // the pages are sound: only a decoder can have panicked
				t.Fatalf("%s panicked over a bad entry: %v", what, err)
			}
		}
		readAll(t, d, k, corrupt)
		_, err = d.PreferStored(func(id blob.ID) bool { return id[0]%2 == 0 })
		corrupt("PreferStored", err)
		corrupt("Drop", d.Drop(nil, map[blob.ID]bool{{0xbb}: true}))
		readAll(t, d, k, corrupt)

		// What check does: every stored object verified, the cache rebuilt
		// if it does not hold them. It may fail only on a corrupt meta
		// bucket, which the repository answers by replacing the file.
		if _, err := d.Verify(ctx, base, nil); err != nil {
			corrupt("Verify", err)
			if !bytes.Equal(bucket, bucketMeta) {
				t.Fatalf("Verify failed on damage outside the meta bucket: %v", err)
			}
			return
		}
		for _, e := range base.o.Packs[0].Entries {
			locs, err := d.LookupAll(blob.Workspace, e.Type, e.ID)
			if err != nil || !containsPlace(locs, base.o.Packs[0].ID, e) {
				t.Fatalf("after Verify, blob %s of the stored object is not in place: %+v %v", e.ID.Short(), locs, err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if d, err = OpenDB(dir, repoID); err != nil {
			t.Fatalf("reopening: %v", err)
		}
		if _, err := d.Sync(ctx, base); err != nil {
			t.Fatalf("Sync after reopening: %v", err)
		}
		readAll(t, d, k, corrupt)
	})
}

func containsPlace(locs []Location, packID blob.ID, e pack.Entry) bool {
	for _, l := range locs {
		if l.Pack == packID && l.Entry == e {
			return true
		}
	}
	return false
}

// checkDecoders: what decodeLoc and decodeCopy accept encodes back to the
// same key and value.
func checkDecoders(t *testing.T, k, v []byte) {
	if l, err := decodeLoc(k, v); err == nil {
		if !bytes.Equal(blobKey(blob.Tier(k[0]), l.Type, l.ID), k) || !bytes.Equal(appendLoc(nil, l.Pack, l.Entry), v) {
			t.Fatalf("decodeLoc(%x, %x) = %+v does not encode back", k, v, l)
		}
	} else if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decodeLoc: %v", err)
	}
	if l, err := decodeCopy(k, v); err == nil {
		bk := blobKey(blob.Tier(k[0]), l.Type, l.ID)
		val := appendLoc(nil, l.Pack, l.Entry)
		if !bytes.Equal(appendCopyKey(bk, bk, val), k) || !bytes.Equal(val, v) {
			t.Fatalf("decodeCopy(%x, %x) = %+v does not encode back", k, v, l)
		}
	} else if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decodeCopy: %v", err)
	}
}

// readAll runs every reader of d, passing each error to corrupt.
func readAll(t *testing.T, d *DB, k []byte, corrupt func(string, error)) {
	t.Helper()
	for _, tier := range blob.Tiers {
		corrupt("ForEachBlob", d.ForEachBlob(tier, func(Location) error { return nil }))
		corrupt("ForEachBlobCopies", d.ForEachBlobCopies(tier, func(locs []Location) error {
			for _, l := range locs[1:] {
				if l.ID != locs[0].ID || l.Type != locs[0].Type {
					t.Fatalf("ForEachBlobCopies: copy of %s given with %s", l.ID.Short(), locs[0].ID.Short())
				}
			}
			return nil
		}))
	}
	corrupt("ForEachPack", d.ForEachPack(func(blob.ID, blob.Tier, uint32) error { return nil }))
	corrupt("ForEachPackStats", d.ForEachPackStats(func(PackStats) error { return nil }))
	corrupt("ForEachObject", d.ForEachObject(func(blob.ID, blob.Tier, ObjectState) error { return nil }))
	_, _, err := d.Count()
	corrupt("Count", err)
	_, err = d.FileCacheGen()
	corrupt("FileCacheGen", err)
	if len(k) >= keySize {
		t, typ, id := blob.Tier(k[0]), blob.Type(k[1]), blob.ID(k[2:keySize])
		_, _, err = d.Lookup(t, typ, id)
		corrupt("Lookup", err)
		_, err = d.LookupAll(t, typ, id)
		corrupt("LookupAll", err)
		corrupt("LookupMany", d.LookupMany(t, typ, []blob.ID{id, {0x10}}, func(int, Location, bool) error { return nil }))
		corrupt("FileCacheIndexed", d.FileCacheIndexed(t, []FileChunks{{IDs: []blob.ID{id}, Size: 50}}))
	}
	if len(k) >= blob.IDSize {
		_, err = d.HasPack(blob.ID(k[:blob.IDSize]))
		corrupt("HasPack", err)
	}
}
