package repo

import (
	"lifeboat/blob"
	"lifeboat/index"
)

// FileCacheRecord is one file cache record to store.
type FileCacheRecord = index.FileCacheRecord

// FileChunks is one file of a FileCacheIndexed query.
type FileChunks = index.FileChunks

// FileCache is the handle on the file cache of incremental capture, kept
// beside the local index: per workspace key and record key (opaque bytes),
// sealed records of files' identities and chunk ids, which a capture
// trusts only after checking their chunks are indexed. It is safe for
// concurrent use.
type FileCache struct{ r *Repository }

// FileCache returns the repository's file cache, or nil when the
// repository was opened without its local index.
func (r *Repository) FileCache() *FileCache {
	if r.idx == nil {
		return nil
	}
	return &FileCache{r}
}

// FileCacheGen returns the local index's removal generation, which moves
// on whenever blobs leave the index.
func (c *FileCache) FileCacheGen() (uint64, error) { return c.r.idx.FileCacheGen() }

// FileCacheGet calls fn with the record under key for workspace key ws
// (nil when there is none); fn must not keep it.
func (c *FileCache) FileCacheGet(ws string, key []byte, fn func(v []byte)) error {
	return c.r.idx.FileCacheGet(ws, key, fn)
}

// FileCacheIndexed sets Indexed for each file of q whose chunks are all
// indexed data blobs of tier t adding up to its size.
func (c *FileCache) FileCacheIndexed(t blob.Tier, q []FileChunks) error {
	return c.r.idx.FileCacheIndexed(t, q)
}

// FileCachePut stores many records of workspace key ws at once (one
// transaction).
func (c *FileCache) FileCachePut(ws string, recs []FileCacheRecord) error {
	return c.r.idx.FileCachePut(ws, recs)
}

// FileCachePrune drops the records of workspace key ws that keep rejects
// and returns how many it dropped.
func (c *FileCache) FileCachePrune(ws string, keep func(key []byte) bool) (int, error) {
	return c.r.idx.FileCachePrune(ws, keep)
}

// FileCacheCount returns the number of records of workspace key ws.
func (c *FileCache) FileCacheCount(ws string) (int, error) { return c.r.idx.FileCacheCount(ws) }
