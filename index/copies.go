package index

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// A blob may have several places: saved twice by concurrent sessions,
// copied by a prune that has not yet deleted the old pack, or named by a
// stale index object (one put back after a prune deleted it and its
// packs, from an old copy of the repository or a stale listing). The
// blobs bucket holds one place per blob, the one lookups answer with
// (restore plans its reads with it, prune counts it as the used copy);
// every other place is kept in the copies bucket, keyed by the blob key,
// the pack id and the offset, so that a reader whose pack turns out missing or
// damaged can try the others (LookupAll).
//
// Which place is the blob's: when an index object is applied, a place in
// a pack that is stored takes the blob over (the last one applied, as
// before copies were kept), and the place it replaces becomes a copy; a
// place in a pack that is not stored (Sync asks the Source, see
// PackSource) never replaces one: it becomes a copy, or the blob's place
// if it has none. So a replayed index object cannot move a blob away from
// the pack that holds it, and prune, which deletes packs whose blobs all
// live elsewhere, never deletes the stored copy for a gone one.

// copyKeySize is the size of a copies bucket key: the blob key, the pack
// id and the offset (as in the value), so that two places of one blob in
// one pack (a lying index object) are both kept.
const copyKeySize = keySize + blob.IDSize + 4

// appendCopyKey appends the copies bucket key of place v (a blobs bucket
// value) of blob key k.
func appendCopyKey(dst, k, v []byte) []byte {
	dst = append(dst, k...)
	dst = append(dst, v[:blob.IDSize]...)
	return append(dst, v[blob.IDSize+1:blob.IDSize+5]...)
}

// samePlace reports whether two blobs bucket values name the same place.
func samePlace(a, b []byte) bool {
	return len(a) == locSize && len(b) == locSize && bytes.Equal(a[:blob.IDSize], b[:blob.IDSize]) &&
		bytes.Equal(a[blob.IDSize+1:blob.IDSize+5], b[blob.IDSize+1:blob.IDSize+5])
}

// decodeCopy decodes a copies bucket entry; its key must name the place
// its value holds.
func decodeCopy(k, v []byte) (Location, error) {
	if len(k) != copyKeySize || len(v) != locSize || !bytes.Equal(k[keySize:], appendCopyKey(nil, nil, v)) {
		return Location{}, fmt.Errorf("%w: copy entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
	}
	return decodeLoc(k[:keySize], v)
}

// LookupAll returns every place the index knows for a blob: the one
// Lookup returns first, then its copies in pack id order. None: nil.
func (d *DB) LookupAll(t blob.Tier, typ blob.Type, id blob.ID) ([]Location, error) {
	k := blobKey(t, typ, id)
	var locs []Location
	err := d.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketBlobs).Get(k)
		if v == nil {
			return nil
		}
		loc, err := decodeLoc(k, v)
		if err != nil {
			return err
		}
		locs = append(locs, loc)
		return forEachCopy(tx.Bucket(bucketCopies).Cursor(), k, func(l Location) error {
			locs = append(locs, l)
			return nil
		})
	})
	return locs, err
}

// forEachCopy calls fn with every copy of blob key k, seeking c.
func forEachCopy(c *bolt.Cursor, k []byte, fn func(Location) error) error {
	for ck, cv := c.Seek(k); ck != nil && bytes.HasPrefix(ck, k); ck, cv = c.Next() {
		l, err := decodeCopy(ck, cv)
		if err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

// ForEachBlobCopies calls fn once with every blob of tier t and all its
// places: locs[0] is the one Lookup returns, the others follow. fn must
// not keep locs.
func (d *DB) ForEachBlobCopies(t blob.Tier, fn func(locs []Location) error) error {
	return d.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		cc := tx.Bucket(bucketCopies).Cursor()
		ck, cv := cc.Seek([]byte{byte(t)})
		var locs []Location
		for k, v := c.Seek([]byte{byte(t)}); k != nil && k[0] == byte(t); k, v = c.Next() {
			loc, err := decodeLoc(k, v)
			if err != nil {
				return err
			}
			locs = append(locs[:0], loc)
			// Both buckets are in key order: copies of keys before k have
			// no blob entry (only a damaged DB has them) and are skipped.
			for ; ck != nil && bytes.Compare(ck[:min(len(ck), keySize)], k) <= 0; ck, cv = cc.Next() {
				if !bytes.HasPrefix(ck, k) {
					continue
				}
				l, err := decodeCopy(ck, cv)
				if err != nil {
					return err
				}
				locs = append(locs, l)
			}
			if err := fn(locs); err != nil {
				return err
			}
			d.touched(tx, keyUnits)
		}
		return nil
	})
}

// putPlace records place v (a blobs bucket value) for blob key k by the
// rule above: stored says whether v's pack is stored.
func putPlace(blobs, copies *bolt.Bucket, k, v []byte, stored bool) error {
	old := blobs.Get(k)
	switch {
	case old == nil || samePlace(old, v):
		return blobs.Put(k, v)
	case !stored:
		return copies.Put(appendCopyKey(make([]byte, 0, copyKeySize), k, v), v)
	case len(old) != locSize:
		return fmt.Errorf("%w: entry of %d/%d bytes", ErrCorrupt, len(k), len(old))
	}
	old = bytes.Clone(old) // the Puts below may move the page it lies in
	if err := copies.Put(appendCopyKey(make([]byte, 0, copyKeySize), k, old), old); err != nil {
		return err
	}
	if err := copies.Delete(appendCopyKey(make([]byte, 0, copyKeySize), k, v)); err != nil {
		return err
	}
	return blobs.Put(k, v)
}

// PreferStored makes a stored copy the place of every blob whose place is
// in a pack stored says is not stored, and returns how many it moved.
// check calls it with the packs it listed, so that a pack lost since the
// places were chosen does not hide a copy that is still stored.
func (d *DB) PreferStored(stored func(pack blob.ID) bool) (int, error) {
	type move struct{ k, from, to []byte }
	collect := func(tx *bolt.Tx) ([]move, error) {
		var moves []move
		blobs := tx.Bucket(bucketBlobs)
		c := tx.Bucket(bucketCopies).Cursor()
		for ck, cv := c.First(); ck != nil; ck, cv = c.Next() {
			l, err := decodeCopy(ck, cv)
			if err != nil {
				return nil, err
			}
			k := ck[:keySize]
			if !stored(l.Pack) || (len(moves) > 0 && bytes.Equal(moves[len(moves)-1].k, k)) {
				continue
			}
			if v := blobs.Get(k); len(v) == locSize && !stored(blob.ID(v[:blob.IDSize])) {
				moves = append(moves, move{bytes.Clone(k), bytes.Clone(v), bytes.Clone(cv)})
			}
		}
		return moves, nil
	}
	n := 0
	err := d.view(func(tx *bolt.Tx) error { // most checks find nothing: no write transaction
		moves, err := collect(tx)
		n = len(moves)
		return err
	})
	if err != nil || n == 0 {
		return 0, err
	}
	err = d.update(func(tx *bolt.Tx) error {
		moves, err := collect(tx) // again: another writer may have moved some
		if err != nil {
			return err
		}
		n = len(moves)
		blobs, copies := tx.Bucket(bucketBlobs), tx.Bucket(bucketCopies)
		for _, m := range moves {
			if err := copies.Put(appendCopyKey(nil, m.k, m.from), m.from); err != nil {
				return err
			}
			if err := copies.Delete(appendCopyKey(nil, m.k, m.to)); err != nil {
				return err
			}
			if err := blobs.Put(m.k, m.to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
