package index

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// ObjectState is how far the DB has taken in one index object.
type ObjectState byte

// Object states, as stored in the objects bucket.
const (
	ObjectApplied ObjectState = ObjectState(objApplied) // every entry is in
	ObjectLocked  ObjectState = ObjectState(objLocked)  // its tier was locked; not applied
	ObjectPartial ObjectState = ObjectState(objPartial) // an Apply was interrupted
)

// ForEachObject calls fn with every index object the DB has seen.
func (d *DB) ForEachObject(fn func(id blob.ID, t blob.Tier, s ObjectState) error) error {
	return d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObjects).ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != 2 {
				return fmt.Errorf("%w: object entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			return fn(blob.ID(k), blob.Tier(v[0]), ObjectState(v[1]))
		})
	})
}

// packValueSize is the packs bucket value: tier (1), pack size (4), number
// of entries the index object lists for it (4), and their sealed bytes (8).
// Prune compares the last two with the entries the blobs bucket still maps
// to the pack: the difference is duplicates, which count as unused.
const packValueSize = 1 + 4 + 4 + 8

func packValue(t blob.Tier, p PackInfo) []byte {
	var n uint64
	for _, e := range p.Entries {
		n += uint64(e.Length)
	}
	v := binary.LittleEndian.AppendUint32([]byte{byte(t)}, p.Size)
	v = binary.LittleEndian.AppendUint32(v, uint32(len(p.Entries)))
	return binary.LittleEndian.AppendUint64(v, n)
}

// PackStats is what the DB knows of one pack.
type PackStats struct {
	ID         blob.ID
	Tier       blob.Tier
	Size       uint32
	Entries    uint32 // entries its index object lists
	EntryBytes uint64 // their sealed bytes
}

// ForEachPackStats calls fn with every pack the DB knows.
func (d *DB) ForEachPackStats(fn func(PackStats) error) error {
	return d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != packValueSize {
				return fmt.Errorf("%w: pack entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			return fn(PackStats{ID: blob.ID(k), Tier: blob.Tier(v[0]), Size: binary.LittleEndian.Uint32(v[1:]),
				Entries: binary.LittleEndian.Uint32(v[5:]), EntryBytes: binary.LittleEndian.Uint64(v[9:])})
		})
	})
}

// HasPack reports whether the DB knows pack id.
func (d *DB) HasPack(id blob.ID) (ok bool, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketPacks).Get(id[:]) != nil
		return nil
	})
	return ok, err
}

// dropPlace removes blob key k's place, in one of the packs being
// dropped: a copy in a pack that stays takes its place, if there is one.
// A copy in a pack known not to be stored is taken only when no other is.
func dropPlace(blobs, copies, unusableB *bolt.Bucket, k []byte, packs map[blob.ID]bool) error {
	var keep, keepKey []byte
	c := copies.Cursor()
	for ck, cv := c.Seek(k); ck != nil && bytes.HasPrefix(ck, k); ck, cv = c.Next() {
		if _, err := decodeCopy(ck, cv); err == nil && !packs[blob.ID(cv[:blob.IDSize])] {
			gone := false
			if v := unusableB.Get(cv[:blob.IDSize]); len(v) == 1 && v[0]&UnusableGone != 0 {
				gone = true
			}
			if keep == nil || !gone {
				keep, keepKey = bytes.Clone(cv), bytes.Clone(ck)
			}
			if !gone {
				break
			}
		}
	}
	if keep == nil {
		return blobs.Delete(k)
	}
	if err := copies.Delete(keepKey); err != nil {
		return err
	}
	return blobs.Put(k, keep)
}

// dropBatch bounds the deletions of one transaction.
const dropBatch = 16384

// Drop removes from the DB the index objects objs and the packs packs with
// every blob entry that points into them, in one pass over the blobs; a
// blob placed in a dropped pack with a copy in another takes that copy as
// its place. Prune calls it for what it deleted, instead of a rebuild: in
// the DB it planned with, every live blob of a deleted pack was already
// remapped to its copy. (Another process's DB may map a blob to a deleted
// copy while another copy survives, so it rebuilds instead; see Sync.)
func (d *DB) Drop(objs []blob.ID, packs map[blob.ID]bool) error {
	if len(packs) > 0 {
		var start []byte
		for {
			var next []byte
			err := d.update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketBlobs)
				c := b.Cursor()
				k, v := c.First()
				if start != nil {
					k, v = c.Seek(start)
				}
				// Collect first, delete after: deleting under a cursor can
				// make its Next skip an entry.
				var del [][]byte
				for ; k != nil; k, v = c.Next() {
					if len(del) >= dropBatch {
						next = append([]byte(nil), k...)
						break
					}
					if len(v) == locSize && packs[blob.ID(v[:blob.IDSize])] {
						del = append(del, append([]byte(nil), k...))
					}
					d.touched(tx, keyUnits)
				}
				// The deletions stop early, to go on in the next
				// transaction, once the pages they read pass
				// applyResidentBudget: the commit reads them all again.
				copies := tx.Bucket(bucketCopies)
				base := fileResident()
				for i, k := range del {
					if i > 0 && i%residentCheckEvery == 0 && fileResident()-base > applyResidentBudget {
						next, del = k, del[:i]
						break
					}
					if err := dropPlace(b, copies, tx.Bucket(bucketUnusable), k, packs); err != nil {
						return err
					}
				}
				if len(del) > 0 {
					return bumpRemovalGen(tx)
				}
				return nil
			})
			if err != nil {
				return err
			}
			if next == nil {
				break
			}
			start = next
		}
	}
	return d.update(func(tx *bolt.Tx) error {
		// Copies in the deleted packs go (those dropPlace promoted are gone
		// already).
		copies := tx.Bucket(bucketCopies)
		var del [][]byte
		c := copies.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) == locSize && packs[blob.ID(v[:blob.IDSize])] {
				del = append(del, bytes.Clone(k))
			}
			d.touched(tx, keyUnits)
		}
		for _, k := range del {
			if err := copies.Delete(k); err != nil {
				return err
			}
		}
		for id := range packs {
			if err := tx.Bucket(bucketPacks).Delete(id[:]); err != nil {
				return err
			}
		}
		for _, id := range objs {
			if err := tx.Bucket(bucketObjects).Delete(id[:]); err != nil {
				return err
			}
		}
		return forgetObjects(tx, objs)
	})
}
