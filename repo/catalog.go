package repo

import (
	"lifeboat/blob"
)

// SnapshotCatalog is the handle on the local index's snapshot catalog:
// per snapshot id, a record (opaque to this package) that the snapshot
// package derives from the snapshot's manifest. Records are sealed with
// the workspace tier's key and bound to their snapshot's id, so the cache
// directory holds nothing of them in the clear and a record cannot stand
// for another snapshot. It is safe for concurrent use.
type SnapshotCatalog struct{ r *Repository }

// SnapshotCatalog returns the repository's snapshot catalog, or nil when
// it was opened without its local index.
func (r *Repository) SnapshotCatalog() *SnapshotCatalog {
	if r.idx == nil {
		return nil
	}
	return &SnapshotCatalog{r}
}

// catalogAAD binds a record to its snapshot.
func catalogAAD(id blob.ID) []byte {
	return append([]byte("lifeboat snapshot catalog\x00"), id[:]...)
}

// Get returns the record of each of ids (nil where there is none, or
// where it does not open) and, with count, how many records the catalog
// holds.
func (c *SnapshotCatalog) Get(ids []blob.ID, count bool) (records [][]byte, total int, err error) {
	keys, err := c.r.TierKeys(blob.Workspace)
	if err != nil {
		return nil, 0, err
	}
	records = make([][]byte, len(ids))
	total, err = c.r.idx.CatalogGet(ids, count, func(i int, v []byte) {
		if plain, err := keys.Open(nil, v, catalogAAD(ids[i])); err == nil {
			records[i] = plain
		}
	})
	return records, total, err
}

// Put stores records[i] for ids[i], sealed, in one transaction.
func (c *SnapshotCatalog) Put(ids []blob.ID, records [][]byte) error {
	keys, err := c.r.TierKeys(blob.Workspace)
	if err != nil {
		return err
	}
	sealed := make([][]byte, len(ids))
	for i, id := range ids {
		sealed[i] = keys.Seal(nil, records[i], catalogAAD(id))
	}
	return c.r.idx.CatalogPut(ids, sealed)
}

// Retain drops the records of snapshots not in ids (sorted by id).
func (c *SnapshotCatalog) Retain(ids []blob.ID) (int, error) { return c.r.idx.CatalogRetain(ids) }
