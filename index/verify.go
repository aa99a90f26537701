package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// VerifyStats says what Verify found.
type VerifyStats struct {
	Objects int       // index objects loaded, authenticated and decoded
	Locked  int       // index objects of tiers the key cannot open
	Damaged []blob.ID // index objects that do not load, authenticate or decode
	// Rebuilt says the DB did not hold what the stored objects say (it had
	// applied one that is damaged now, or lacks an entry of an intact one)
	// and was rebuilt from them.
	Rebuilt bool
}

// Verify loads every index object the Source lists, applied or not, from
// the repository: a Sync loads only those it has not applied, so an object
// damaged after it was applied goes unseen by it. fn, if not nil, is
// called with each one that opens. Then the DB must hold what they say:
// no damaged object applied, every entry of every intact applied object in
// place (as a blob's place or as a copy), and every entry decodes and
// agrees with the others (consistent). If it does not, Verify empties it and syncs it again, so that afterwards it holds exactly what the
// intact stored objects say; objects that appeared since the last Sync are
// applied too.
func (d *DB) Verify(ctx context.Context, src Source, fn func(id blob.ID, o *Object) error) (VerifyStats, error) {
	var st VerifyStats
	var ids []blob.ID
	if err := src.ListIndex(ctx, func(id blob.ID) error { ids = append(ids, id); return nil }); err != nil {
		return st, fmt.Errorf("listing index objects: %w", err)
	}
	slices.SortFunc(ids, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	stale, unapplied := false, false
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		state, err := d.objectState(id)
		if errors.Is(err, ErrCorrupt) {
			stale = true // rebuilt below
		} else if err != nil {
			return st, err
		}
		o, err := src.LoadIndex(ctx, id)
		switch {
		case errors.Is(err, crypt.ErrTierLocked):
			st.Locked++
			continue
		case errors.Is(err, ErrObjectDamaged):
			st.Damaged = append(st.Damaged, id)
			stale = stale || state == objApplied || state == objPartial
			continue
		case errors.Is(err, backend.ErrNotFound):
			continue // removed since it was listed: as if never listed
		case err != nil:
			return st, fmt.Errorf("index object %s: %w", id, err)
		}
		st.Objects++
		if fn != nil {
			if err := fn(id, o); err != nil {
				return st, err
			}
		}
		if state != objApplied {
			unapplied = true
			continue
		}
		if !stale {
			held, err := d.holds(o)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				return st, err
			}
			stale = !held || err != nil
		}
	}
	if !stale {
		ok, err := d.consistent(ids)
		if err != nil {
			return st, err
		}
		stale = !ok
	}
	if stale {
		st.Rebuilt = true
		if err := d.reset(); err != nil {
			return st, err
		}
	}
	if stale || unapplied {
		if _, err := d.Sync(ctx, src); err != nil {
			return st, err
		}
	}
	return st, nil
}

// objectState is the objects bucket's state of index object id (0: none).
func (d *DB) objectState(id blob.ID) (byte, error) {
	var state byte
	err := d.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketObjects).Get(id[:])
		switch {
		case v == nil:
		case len(v) != 2:
			return fmt.Errorf("%w: object entry of %d bytes", ErrCorrupt, len(v))
		default:
			state = v[1]
		}
		return nil
	})
	return state, err
}

// holds reports whether every pack and entry of o is in the DB: the pack
// in the packs bucket, each entry as its blob's place or as a copy.
func (d *DB) holds(o *Object) (bool, error) {
	ok := true
	err := d.view(func(tx *bolt.Tx) error {
		blobs, copies, packs := tx.Bucket(bucketBlobs), tx.Bucket(bucketCopies), tx.Bucket(bucketPacks)
		k := make([]byte, 0, keySize)
		ck := make([]byte, 0, copyKeySize)
		v := make([]byte, 0, locSize)
		for _, p := range o.Packs {
			if packs.Get(p.ID[:]) == nil {
				ok = false
				return nil
			}
			for _, e := range p.Entries {
				k = appendBlobKey(k[:0], o.Tier, e.Type, e.ID)
				v = appendLoc(v[:0], p.ID, e)
				if bytes.Equal(blobs.Get(k), v) {
					continue
				}
				if !bytes.Equal(copies.Get(appendCopyKey(ck[:0], k, v)), v) {
					ok = false
					return nil
				}
			}
		}
		return nil
	})
	return ok, err
}

// consistent scans every entry of the objects, packs, blobs and copies
// buckets: each must decode, an applied object must be one of listed, and
// every place must lie in a pack the packs bucket knows, every copy be of
// a blob that has a place. It does not look for entries no object names
// beside these.
func (d *DB) consistent(listed []blob.ID) (bool, error) {
	present := make(map[blob.ID]bool, len(listed))
	for _, id := range listed {
		present[id] = true
	}
	ok := true
	err := d.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketObjects).Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			ok = len(k) == blob.IDSize && len(v) == 2 && v[1] >= objApplied && v[1] <= objPartial &&
				(v[1] == objLocked || present[blob.ID(k)])
		}
		packs := tx.Bucket(bucketPacks)
		c = packs.Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			ok = len(k) == blob.IDSize && len(v) == packValueSize
		}
		blobs := tx.Bucket(bucketBlobs)
		c = blobs.Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			l, err := decodeLoc(k, v)
			ok = err == nil && packs.Get(l.Pack[:]) != nil
			d.touched(tx, keyUnits)
		}
		c = tx.Bucket(bucketCopies).Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			l, err := decodeCopy(k, v)
			ok = err == nil && packs.Get(l.Pack[:]) != nil && blobs.Get(k[:keySize]) != nil
			d.touched(tx, lookupUnits)
		}
		return nil
	})
	return ok, err
}

// reset empties the DB, as a rebuild does.
func (d *DB) reset() error {
	d.syncMu.Lock()
	defer d.syncMu.Unlock()
	return d.update(func(tx *bolt.Tx) error {
		repo := bytes.Clone(tx.Bucket(bucketMeta).Get(keyRepo))
		if len(repo) != blob.IDSize {
			return fmt.Errorf("%w: repository id of %d bytes", ErrCorrupt, len(repo))
		}
		return resetTx(tx, blob.ID(repo))
	})
}
