package index

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// A place in a pack that must not be reused may still be read (a restore
// of a snapshot that names it falls back or fails, naming the pack), but a
// new snapshot must never come to reference it: dedup (LookupUsable) and
// the file cache's check that a file's chunks are indexed skip it, so the
// blob is stored again. The unusable bucket records such packs, pack id ->
// reasons (a bit set):
//
//   - UnusableGone: the pack is not stored. Sync learns it for the packs
//     of the objects it applies (a replayed index object naming a pack a
//     prune deleted), check for every pack it lists. Cleared when a writer
//     that has just stored the pack applies an object naming it, or check
//     finds it stored.
//   - UnusableCondemned: a prune condemned the pack (repo: the
//     repository's condemnation objects, SetCondemned); it is deleted by a
//     later prune, after a safety margin.
//
// Marking a pack unusable moves the removal generation on (filecache.go),
// so file cache records stamped before are checked chunk by chunk again.
var bucketUnusable = []byte("unusable")

// Reasons a pack is unusable (bits of the unusable bucket's value).
const (
	UnusableGone      byte = 1
	UnusableCondemned byte = 2
)

// unusable reports whether blobs bucket value v (or a copy's) is a place
// in a pack the unusable bucket names.
func unusable(u *bolt.Bucket, v []byte) bool {
	if len(v) < blob.IDSize {
		return true
	}
	r := u.Get(v[:blob.IDSize])
	return len(r) == 1 && r[0] != 0
}

// usable picks the places of blobs that may be reused, inside one read
// transaction: it opens the buckets once, for every key it is asked about.
type usable struct {
	blobs, copies, unusable *bolt.Bucket
	none                    bool // the unusable bucket is empty: every place may be reused
}

func newUsable(tx *bolt.Tx) usable {
	u := usable{blobs: tx.Bucket(bucketBlobs), copies: tx.Bucket(bucketCopies), unusable: tx.Bucket(bucketUnusable)}
	first, _ := u.unusable.Cursor().First()
	u.none = first == nil
	return u
}

// place returns blob key k's place that may be reused: its place, else
// the first copy in a pack that is not unusable; nil when none.
func (u usable) place(k []byte) []byte {
	v := u.blobs.Get(k)
	if v == nil || u.none || !unusable(u.unusable, v) {
		return v
	}
	c := u.copies.Cursor()
	for ck, cv := c.Seek(k); ck != nil && bytes.HasPrefix(ck, k); ck, cv = c.Next() {
		if len(cv) == locSize && !unusable(u.unusable, cv) {
			return cv
		}
	}
	return nil
}

// LookupUsable is Lookup for dedup: it returns a place of the blob whose
// pack is neither known to be gone nor condemned (its place first, then
// its copies), and not found when it has none, so that the caller stores
// the blob again rather than reference a pack that is, or will be, gone.
func (d *DB) LookupUsable(t blob.Tier, typ blob.Type, id blob.ID) (loc Location, ok bool, err error) {
	return d.lookup(t, typ, id, func(tx *bolt.Tx, k []byte) []byte { return newUsable(tx).place(k) })
}

// setUnusable sets (on) or clears reason for packs in the unusable bucket
// and moves the removal generation on when it set a bit that was clear.
func setUnusable(tx *bolt.Tx, packs []blob.ID, reason byte, on bool) error {
	u := tx.Bucket(bucketUnusable)
	added := false
	for _, id := range packs {
		var r byte
		if v := u.Get(id[:]); len(v) == 1 {
			r = v[0]
		}
		nr := r &^ reason
		if on {
			nr = r | reason
		}
		switch {
		case nr == r:
		case nr == 0:
			if err := u.Delete(id[:]); err != nil {
				return err
			}
		default:
			if err := u.Put(id[:], []byte{nr}); err != nil {
				return err
			}
		}
		added = added || nr&^r != 0
	}
	if added {
		return bumpRemovalGen(tx)
	}
	return nil
}

// MarkGone records, for check, which of the packs the DB knows are stored:
// those stored says are not become unusable (UnusableGone), the others
// usable again. It writes only when that changes something.
func (d *DB) MarkGone(stored func(pack blob.ID) bool) error {
	var gone, there []blob.ID
	err := d.view(func(tx *bolt.Tx) error {
		u := tx.Bucket(bucketUnusable)
		return tx.Bucket(bucketPacks).ForEach(func(k, _ []byte) error {
			if len(k) != blob.IDSize {
				return fmt.Errorf("%w: pack entry of %d bytes", ErrCorrupt, len(k))
			}
			v := u.Get(k)
			marked := len(v) == 1 && v[0]&UnusableGone != 0
			switch st := stored(blob.ID(k)); {
			case st && marked:
				there = append(there, blob.ID(k))
			case !st && !marked:
				gone = append(gone, blob.ID(k))
			}
			return nil
		})
	})
	if err != nil || len(gone)+len(there) == 0 {
		return err
	}
	return d.update(func(tx *bolt.Tx) error {
		if err := setUnusable(tx, there, UnusableGone, false); err != nil {
			return err
		}
		return setUnusable(tx, gone, UnusableGone, true)
	})
}

// SetCondemned marks packs condemned (UnusableCondemned); with exact, it
// also clears the mark of every other pack, so that the condemned packs
// are exactly packs: the ones the repository's condemnation objects name.
// It returns how many were newly condemned. When the marks are already
// so (every capture's session start asks, and they rarely change), it
// writes nothing: a write transaction costs two syncs of the DB file.
func (d *DB) SetCondemned(packs map[blob.ID]bool, exact bool) (added int, err error) {
	var clear, set []blob.ID
	err = d.view(func(tx *bolt.Tx) error {
		clear, set = condemnedChanges(tx, packs, exact)
		return nil
	})
	if err != nil || len(clear) == 0 && len(set) == 0 {
		return 0, err
	}
	err = d.update(func(tx *bolt.Tx) error {
		clear, set = condemnedChanges(tx, packs, exact)
		if err := setUnusable(tx, clear, UnusableCondemned, false); err != nil {
			return err
		}
		return setUnusable(tx, set, UnusableCondemned, true)
	})
	return len(set), err
}

// condemnedChanges returns the packs whose condemned mark SetCondemned
// clears and those it sets.
func condemnedChanges(tx *bolt.Tx, packs map[blob.ID]bool, exact bool) (clear, set []blob.ID) {
	u := tx.Bucket(bucketUnusable)
	if exact {
		_ = u.ForEach(func(k, v []byte) error { // (the function never fails)
			if len(k) == blob.IDSize && len(v) == 1 && v[0]&UnusableCondemned != 0 && !packs[blob.ID(k)] {
				clear = append(clear, blob.ID(k))
			}
			return nil
		})
	}
	for id := range packs {
		if v := u.Get(id[:]); len(v) != 1 || v[0]&UnusableCondemned == 0 {
			set = append(set, id)
		}
	}
	return clear, set
}

// Unusable returns the reasons pack id is unusable (0: it is not).
func (d *DB) Unusable(id blob.ID) (r byte, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketUnusable).Get(id[:]); len(v) == 1 {
			r = v[0]
		}
		return nil
	})
	return r, err
}
