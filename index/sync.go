package index

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"lifeboat/backend"
	"slices"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
	"lifeboat/crypt"
)

// Source is where Sync finds index objects: the repository.
type Source interface {
	// ListIndex calls fn with the id of every index object.
	ListIndex(ctx context.Context, fn func(id blob.ID) error) error
	// LoadIndex loads and opens one index object. An object of a tier the
	// caller's key lacks fails with an error wrapping crypt.ErrTierLocked;
	// a damaged one with an error wrapping ErrObjectDamaged; one removed
	// since it was listed with an error wrapping backend.ErrNotFound.
	LoadIndex(ctx context.Context, id blob.ID) (*Object, error)
}

// ErrObjectDamaged marks an index object that does not decode or
// authenticate. Sync skips it; `repair index` replaces it.
var ErrObjectDamaged = errors.New("index object is damaged")

// SyncStats says what a Sync did.
type SyncStats struct {
	Rebuilt bool      // the DB was emptied first because an applied object is gone
	Applied int       // index objects newly applied
	Locked  int       // index objects of tiers the key cannot open
	Damaged []blob.ID // index objects skipped because they are damaged
}

// Sync brings the DB up to date with the repository's index objects.
func (d *DB) Sync(ctx context.Context, src Source) (SyncStats, error) {
	var st SyncStats
	present := map[blob.ID]bool{}
	if err := src.ListIndex(ctx, func(id blob.ID) error { present[id] = true; return nil }); err != nil {
		return st, fmt.Errorf("listing index objects: %w", err)
	}
	if synced, err := d.synced(present); err != nil || synced {
		return st, err
	}
	var todo []blob.ID
	err := d.db.Update(func(tx *bolt.Tx) error {
		objs := tx.Bucket(bucketObjects)
		seen := map[blob.ID]byte{}
		err := objs.ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != 2 {
				return fmt.Errorf("%w: object entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			seen[blob.ID(k)] = v[1]
			return nil
		})
		if err != nil {
			return err
		}
		for id, state := range seen {
			switch {
			case present[id]:
			case state == objApplied || state == objPartial:
				st.Rebuilt = true
			default: // seen while its tier was locked, and gone since: forget it
				if err := objs.Delete(id[:]); err != nil {
					return err
				}
			}
		}
		if st.Rebuilt {
			repo := bytes.Clone(tx.Bucket(bucketMeta).Get(keyRepo))
			if err := resetTx(tx, blob.ID(repo)); err != nil {
				return err
			}
			seen = nil
		}
		for id := range present {
			if state, ok := seen[id]; !ok || state == objLocked || state == objPartial {
				todo = append(todo, id)
			}
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	slices.SortFunc(todo, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range todo {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		o, err := src.LoadIndex(ctx, id)
		switch {
		case errors.Is(err, crypt.ErrTierLocked):
			st.Locked++
			err = d.markLocked(id)
		case errors.Is(err, ErrObjectDamaged):
			st.Damaged = append(st.Damaged, id)
			err = nil
		case errors.Is(err, backend.ErrNotFound):
			// Removed since it was listed (a prune's delete phase, which
			// writes its replacement objects first): as if never listed.
			// A caller that must see every object syncs under a lock.
			err = nil
		case err != nil:
			return st, fmt.Errorf("index object %s: %w", id, err)
		default:
			st.Applied++
			err = d.Apply(id, o)
		}
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// synced reports whether the DB has applied exactly the index objects
// present, and nothing else: then Sync has nothing to do, and does it in a
// read transaction (a write one would commit and sync the file).
func (d *DB) synced(present map[blob.ID]bool) (bool, error) {
	ok := true
	err := d.db.View(func(tx *bolt.Tx) error {
		n := 0
		c := tx.Bucket(bucketObjects).Cursor()
		for k, v := c.First(); k != nil && ok; k, v = c.Next() {
			n++
			ok = len(k) == blob.IDSize && present[blob.ID(k)] && len(v) == 2 && v[1] == objApplied
		}
		ok = ok && n == len(present)
		return nil
	})
	return ok, err
}

func (d *DB) markLocked(id blob.ID) error {
	return d.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObjects).Put(id[:], []byte{0, objLocked})
	})
}

// applyBatch bounds the entries one bbolt transaction writes: bbolt keeps
// every leaf a transaction touches in memory, and random ids touch many.
const applyBatch = 8192

// Apply records the entries of index object id, in key order and in
// transactions of applyBatch entries. The first transaction marks the
// object partial and the last marks it applied, so an interrupted Apply is
// redone by the next Sync, or undone by a rebuild if the object is gone.
func (d *DB) Apply(id blob.ID, o *Object) error { return d.apply(id, o, -1) }

// apply does Apply's work; a test passes stopAfter >= 0 to end it after
// that many transactions, as a crash would.
func (d *DB) apply(id blob.ID, o *Object, stopAfter int) error {
	type kv struct{ k, v []byte }
	kvs := make([]kv, 0, o.Entries())
	for _, p := range o.Packs {
		for _, e := range p.Entries {
			kvs = append(kvs, kv{blobKey(o.Tier, e.Type, e.ID), encodeLoc(p.ID, e)})
		}
	}
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	for n := 0; ; n++ {
		if n == stopAfter {
			return nil
		}
		batch := kvs[:min(applyBatch, len(kvs))]
		kvs = kvs[len(batch):]
		last := len(kvs) == 0
		// The batch commits with its keys in the filter: see filter.go.
		err := d.filterUpdate(len(batch), func(i int) []byte { return batch[i].k }, func(tx *bolt.Tx) error {
			blobs := tx.Bucket(bucketBlobs)
			blobs.FillPercent = fillPercent
			for _, e := range batch {
				if err := blobs.Put(e.k, e.v); err != nil {
					return err
				}
			}
			state := objPartial
			if last {
				state = objApplied
				packs := tx.Bucket(bucketPacks)
				for _, p := range o.Packs {
					if err := packs.Put(p.ID[:], packValue(o.Tier, p)); err != nil {
						return err
					}
				}
			}
			return tx.Bucket(bucketObjects).Put(id[:], []byte{byte(o.Tier), state})
		})
		if err != nil || last {
			return err
		}
	}
}
