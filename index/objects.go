package index

import (
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
	return d.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketObjects).ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != 2 {
				return fmt.Errorf("%w: object entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			return fn(blob.ID(k), blob.Tier(v[0]), ObjectState(v[1]))
		})
	})
}

// HasPack reports whether the DB knows pack id.
func (d *DB) HasPack(id blob.ID) (ok bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketPacks).Get(id[:]) != nil
		return nil
	})
	return ok, err
}
