package index_test

import (
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/index"
	"lifeboat/internal/seedtest"
)

// A DB rebuilt by a lifeboat that kept no removal generation (one from
// before it: its rebuild recreates the meta bucket without it) has lost
// the count. When this version next removes blobs, the generation must
// not come back to a value an older file cache record was stamped with:
// that record's chunks left the DB in the rebuild, and a match would let
// a capture reuse them unchecked (it looks chunks up, FileCacheIndexed,
// only for records of another generation).
func TestRemovalGenAfterOldRebuild(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir := t.TempDir()
	d := mustOpenDB(t, dir, testRepo)
	p1, p2 := randDataPack(r, 4), randDataPack(r, 4)
	for _, p := range []index.PackInfo{p1, p2} {
		mustApply(t, r, d, &index.Object{Tier: blob.Workspace, Packs: []index.PackInfo{p}})
	}
	gen, err := d.FileCacheGen()
	if err != nil {
		t.Fatal(err)
	}
	// A file cache record stamped with gen names p1's blobs as one file.
	file := index.FileChunks{}
	for _, x := range p1.Entries {
		file.IDs = append(file.IDs, x.ID)
		file.Size += uint64(x.PlainLen)
	}
	path := d.Path()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	// The older version's rebuild, after a prune elsewhere removed p1:
	// meta without the generation, p1's blobs gone, the file cache kept.
	editClosedDB(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte("meta")).Delete([]byte("removals")); err != nil {
			return err
		}
		blobs := tx.Bucket([]byte("blobs"))
		for _, x := range p1.Entries {
			k := append([]byte{byte(blob.Workspace), byte(blob.Data)}, x.ID[:]...)
			if blobs.Get(k) == nil {
				t.Fatalf("blob key layout: %x not found", k)
			}
			if err := blobs.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})

	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	lookup := func(when string) {
		t.Helper()
		if g, err := d.FileCacheGen(); err != nil || g == gen {
			t.Errorf("%s: the generation is %d (%v), the stamp of a record whose chunks are gone", when, g, err)
		}
		q := []index.FileChunks{file}
		if err := d.FileCacheIndexed(blob.Workspace, q); err != nil || q[0].Indexed {
			t.Errorf("%s: the gone chunks look indexed (%v)", when, err)
		}
	}
	lookup("after the old rebuild")
	// Opening it started a new count, unlike any stamp made before.
	if g, err := d.FileCacheGen(); err != nil || g == 0 || g == gen {
		t.Errorf("generation after reopening: %d (%v), was %d", g, err, gen)
	}
	// This version now removes blobs (a prune here drops p2).
	if err := d.Drop(nil, map[blob.ID]bool{p2.ID: true}); err != nil {
		t.Fatal(err)
	}
	lookup("after a later Drop")
}
