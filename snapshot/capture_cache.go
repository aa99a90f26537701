package snapshot

import (
	"bytes"
	"log/slog"
	"slices"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
)

// File cache keys are keyed digests (the workspace tier's blob id key), so
// the cache holds no workspace ids or names: the workspace's key is the
// digest of its id, a directory's key chains its parent's key with its
// name, and a file's key is its directory's key chained with its name.
// Chaining keeps the cost per entry constant however deep the tree.

// capCacheKeys returns the workspace key and the root directory's key.
func capCacheKeys(k *crypt.TierKeys, ws string) (string, blob.ID) {
	wsID := k.BlobID([]byte("lifeboat file cache workspace\x00" + ws))
	return wsID.String(), k.BlobID(append([]byte("lifeboat file cache root\x00"), wsID[:]...))
}

// capChildKey is the key of entry name in the directory of key parent.
func capChildKey(k *crypt.TierKeys, parent blob.ID, name string) blob.ID {
	b := make([]byte, 0, blob.IDSize+len(name))
	b = append(append(b, parent[:]...), name...)
	return k.BlobID(b)
}

// cacheHit returns the cache entry of j's file when its device, inode,
// size, mtime and ctime are those cached and every chunk is still in the
// repository's index (checked by the cache, in one transaction).
func (c *capturer) cacheHit(j *capJob) (index.FileEntry, bool) {
	e, ok, err := c.o.Cache.FileCacheGetIndexed(c.wsKey, j.key[:], c.o.tier())
	if err != nil || !ok {
		return e, false
	}
	st := &j.st
	return e, e.Dev == st.Dev && e.Inode == st.Ino && e.Size == uint64(st.Size) &&
		e.MtimeNs == st.Mtim.Nano() && e.CtimeNs == st.Ctim.Nano()
}

// cacheKeep notes that file key stays in the cache, with a new entry from
// st when st is set. Written by updateCache once the manifest is saved.
func (c *capturer) cacheKeep(key blob.ID, st *unix.Stat_t, xattrs bool, ids ...blob.ID) {
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.cacheSeen = append(c.cacheSeen, key)
	if st != nil {
		c.cachePuts = append(c.cachePuts, index.FileCacheRecord{Path: key[:], Entry: index.FileEntry{
			Dev: st.Dev, Inode: st.Ino, Size: uint64(st.Size),
			MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(), Xattrs: xattrs, Content: ids}})
	}
}

// capCacheBatch is the number of entries written per transaction.
const capCacheBatch = 20000

// updateCache writes the new entries in batches and drops those of files
// this capture did not keep (gone, excluded, changed, or too recently
// modified to trust). It runs after the manifest is saved; a failure only
// makes the next capture read more, so it is logged, not returned.
func (c *capturer) updateCache() {
	if c.o.Cache == nil {
		return
	}
	puts := c.cachePuts
	slices.SortFunc(puts, func(a, b index.FileCacheRecord) int { return bytes.Compare(a.Path, b.Path) })
	for len(puts) > 0 {
		n := min(len(puts), capCacheBatch)
		if err := c.o.Cache.FileCachePut(c.wsKey, puts[:n]); err != nil {
			slog.Warn("capture: updating the file cache failed; the next capture reads more", "err", err)
			return
		}
		puts = puts[n:]
	}
	seen := c.cacheSeen
	slices.SortFunc(seen, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	_, err := c.o.Cache.FileCachePrune(c.wsKey, func(k []byte) bool {
		_, found := slices.BinarySearchFunc(seen, k, func(id blob.ID, k []byte) int { return bytes.Compare(id[:], k) })
		return found
	})
	if err != nil {
		slog.Warn("capture: pruning the file cache failed", "err", err)
	}
}
