package index

import (
	"bytes"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// The snapshot catalog remembers, per snapshot id, a sealed record of
// what finding a workspace's snapshots needs from its manifest (the
// snapshot package writes and reads it): then only the manifests that
// matter are loaded, not every one in the repository. A snapshot's
// manifest never changes, so neither does its record; a record whose
// snapshot is gone is never asked for, and CatalogRetain drops it. Like
// the file cache, the bucket is left alone by index rebuilds.
var bucketCatalog = []byte("snapshots")

// CatalogGet calls fn(i, v) with the record of ids[i] for each id that
// has one, in one read transaction (fn must not keep v). With count, it
// also returns how many records the catalog holds in all (a walk of the
// bucket's pages).
func (d *DB) CatalogGet(ids []blob.ID, count bool, fn func(i int, v []byte)) (total int, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCatalog)
		if b == nil {
			return nil
		}
		if count {
			total = b.Stats().KeyN
		}
		for i, id := range ids {
			if v := b.Get(id[:]); v != nil {
				fn(i, v)
			}
		}
		return nil
	})
	return total, err
}

// CatalogPut stores records[i] for ids[i], in one transaction.
func (d *DB) CatalogPut(ids []blob.ID, records [][]byte) error {
	if len(ids) == 0 {
		return nil
	}
	return d.update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCatalog)
		if err != nil {
			return err
		}
		b.FillPercent = fillPercent
		for i, id := range ids {
			if err := b.Put(id[:], records[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// CatalogRetain drops the records of every snapshot not in ids (sorted
// by id) and returns how many it dropped.
func (d *DB) CatalogRetain(ids []blob.ID) (dropped int, err error) {
	err = d.update(func(tx *bolt.Tx) error {
		dropped = 0 // the transaction may run again
		b := tx.Bucket(bucketCatalog)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		j := 0
		for k, _ := c.First(); k != nil; {
			for j < len(ids) && bytes.Compare(ids[j][:], k) < 0 {
				j++
			}
			if j < len(ids) && bytes.Equal(ids[j][:], k) {
				k, _ = c.Next()
				continue
			}
			gone := bytes.Clone(k)
			if err := c.Delete(); err != nil {
				return err
			}
			dropped++
			k, _ = c.Seek(gone) // the key after it
		}
		return nil
	})
	return dropped, err
}
