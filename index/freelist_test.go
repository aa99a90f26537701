package index_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lifeboat/internal/seedtest"
)

// storedFreelist reports whether the current meta page of the closed bbolt
// file at path names a free-list page. bbolt's meta page: a 16-byte page
// header, then magic, version, page size and flags (u32 each), the root
// bucket (pgid, sequence), the free list's pgid (all ones: not stored),
// the high-water pgid and the txid (u64 each); the meta of the higher
// txid is current.
func storedFreelist(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	pageSize := int(le.Uint32(b[16+8:]))
	if pageSize < 1024 || len(b) < 2*pageSize {
		t.Fatalf("%s: page size %d in a file of %d bytes", path, pageSize, len(b))
	}
	m0, m1 := b[16:], b[pageSize+16:]
	m := m0
	if le.Uint64(m1[48:]) > le.Uint64(m0[48:]) {
		m = m1
	}
	return le.Uint64(m[32:]) != ^uint64(0)
}

// The DB stores bbolt's free list, so an open reads it instead of every
// page. A file an older Lifeboat wrote, without it, opens with its
// entries, and from then on has it stored.
func TestOpenDBStoresFreelistOfOlderFile(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	dir, objs := filledDB(t, r)
	path := filepath.Join(dir, "index.db")
	if !storedFreelist(t, path) {
		t.Fatal("a DB this version wrote has no stored free list")
	}
	// Write a transaction as the older version did: the meta then says
	// no free list is stored.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket([]byte("meta"))
		return m.Put([]byte("version"), m.Get([]byte("version")))
	}); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	if storedFreelist(t, path) {
		t.Fatal("a file written with NoFreelistSync has a stored free list")
	}
	d := mustOpenDB(t, dir, testRepo)
	checkDB(t, d, locations(objs...))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !storedFreelist(t, path) {
		t.Fatal("the older file has no stored free list after an open")
	}
	d = mustOpenDB(t, dir, testRepo)
	defer d.Close()
	checkDB(t, d, locations(objs...))
}
