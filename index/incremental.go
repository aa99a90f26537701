package index

import (
	"bytes"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// When a prune removes index objects (it superseded them, deleting some of
// their packs), another process's Sync finds applied objects gone. It does
// not rebuild the DB from every object left: the objpacks bucket says which
// packs each gone object listed, packobjs which objects list each pack, so
// it drops exactly the packs no present object lists (Drop: their places
// go, a copy in a pack that stays takes over) and the gone objects. New
// objects are applied as always. Cost: reading the gone objects' pack
// lists, and one pass over the blobs and copies buckets when a pack goes.

// recordPacks records the packs every object of objs lists.
func recordPacks(tx *bolt.Tx, objs []Named) error {
	op, po := tx.Bucket(bucketObjPacks), tx.Bucket(bucketPackObjs)
	k := make([]byte, 2*blob.IDSize)
	for _, no := range objs {
		for _, p := range no.Object.Packs {
			copy(k, no.ID[:])
			copy(k[blob.IDSize:], p.ID[:])
			if err := op.Put(bytes.Clone(k), []byte{}); err != nil {
				return err
			}
			copy(k, p.ID[:])
			copy(k[blob.IDSize:], no.ID[:])
			if err := po.Put(bytes.Clone(k), []byte{}); err != nil {
				return err
			}
		}
	}
	return nil
}

// goneObjectPacks returns the packs that the gone objects list and no
// present object does (by the recorded packs of what the DB applied).
func goneObjectPacks(tx *bolt.Tx, gone []blob.ID, present map[blob.ID]bool) map[blob.ID]bool {
	op, po := tx.Bucket(bucketObjPacks), tx.Bucket(bucketPackObjs)
	packs := map[blob.ID]bool{}
	goneSet := map[blob.ID]bool{}
	for _, id := range gone {
		goneSet[id] = true
	}
	for _, id := range gone {
		c := op.Cursor()
		for k, _ := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = c.Next() {
			if len(k) != 2*blob.IDSize {
				continue
			}
			pack := blob.ID(k[blob.IDSize:])
			listed := false
			pc := po.Cursor()
			for pk, _ := pc.Seek(pack[:]); pk != nil && bytes.HasPrefix(pk, pack[:]); pk, _ = pc.Next() {
				if len(pk) == 2*blob.IDSize {
					if obj := blob.ID(pk[blob.IDSize:]); present[obj] && !goneSet[obj] {
						listed = true
						break
					}
				}
			}
			if !listed {
				packs[pack] = true
			}
		}
	}
	return packs
}

// forgetObjects removes the recorded packs of objs. (Drop calls it.)
func forgetObjects(tx *bolt.Tx, objs []blob.ID) error {
	op, po := tx.Bucket(bucketObjPacks), tx.Bucket(bucketPackObjs)
	for _, id := range objs {
		var del [][]byte
		c := op.Cursor()
		for k, _ := c.Seek(id[:]); k != nil && bytes.HasPrefix(k, id[:]); k, _ = c.Next() {
			del = append(del, bytes.Clone(k))
		}
		for _, k := range del {
			if err := op.Delete(k); err != nil {
				return err
			}
			if len(k) == 2*blob.IDSize {
				rk := append(bytes.Clone(k[blob.IDSize:]), k[:blob.IDSize]...)
				if err := po.Delete(rk); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
