package snapshot

import (
	"bytes"
	"encoding/binary"
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
// name, and a file's key is the first half of its directory's key followed
// by half of the digest of its directory's key chained with its name.
// Chaining keeps the cost per entry constant however deep the tree, and
// the shared first half keeps one directory's entries together in the
// cache, so a directory's lookups are one sweep. Each entry is sealed with
// a keyed digest of its key and contents (capSeal): an entry the capture
// did not write, or one damaged on disk, is not used.

// capCacheKeys returns the workspace key and the root directory's key.
func capCacheKeys(k *crypt.TierKeys, ws string) (string, blob.ID) {
	wsID := k.BlobID([]byte("lifeboat file cache workspace\x00" + ws))
	return wsID.String(), k.BlobID(append([]byte("lifeboat file cache root\x00"), wsID[:]...))
}

// capChildKey is the key of subdirectory name in the directory of key
// parent.
func capChildKey(k *crypt.TierKeys, parent blob.ID, name string) blob.ID {
	b := make([]byte, 0, blob.IDSize+len(name))
	b = append(append(b, parent[:]...), name...)
	return k.BlobID(b)
}

// capFileKey is the cache key of file name in the directory of key dir.
func capFileKey(k *crypt.TierKeys, dir blob.ID, name string) blob.ID {
	h := capChildKey(k, dir, name)
	var key blob.ID
	copy(key[:blob.IDSize/2], dir[:])
	copy(key[blob.IDSize/2:], h[:])
	return key
}

// capSeal is the keyed digest sealing file cache entry e under key.
func capSeal(k *crypt.TierKeys, key blob.ID, e *index.FileEntry) blob.ID {
	var buf [256]byte // a file of up to 4 chunks: no allocation
	b := buf[:0]
	b = append(b, "lifeboat file cache entry\x00"...)
	b = append(b, key[:]...)
	for _, v := range []uint64{e.Dev, e.Inode, e.Size, uint64(e.MtimeNs), uint64(e.CtimeNs), e.Gen} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	if e.Xattrs {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	for _, id := range e.Content {
		b = append(b, id[:]...)
	}
	return k.BlobID(b)
}

// cacheLookup sets, for the entries names of d that sts says are regular
// files with content, their file keys and the cache entries that can
// stand in for reading them: sealed by this workspace's key, chunks still
// indexed, and device, inode, size, mtime and ctime as stat'ed now. One
// read transaction serves them all.
func (c *capturer) cacheLookup(d *capDir, names []string, sts []unix.Stat_t, keys []blob.ID, hits []*index.FileEntry) {
	q := make([]index.FileCacheQuery, 0, len(names))
	at := make([]int, 0, len(names))
	for i, name := range names {
		if sts[i].Mode&unix.S_IFMT != unix.S_IFREG || sts[i].Size == 0 {
			continue
		}
		keys[i] = capFileKey(c.keys, d.key, name)
		q = append(q, index.FileCacheQuery{Key: keys[i][:]})
		at = append(at, i)
	}
	if len(q) == 0 {
		return
	}
	if err := c.o.Cache.FileCacheLookup(c.wsKey, c.o.tier(), q); err != nil {
		slog.Warn("capture: the file cache failed; files are read instead", "err", err)
		return
	}
	for j := range q {
		e, st := &q[j].Entry, &sts[at[j]]
		if q[j].Found && e.Seal == capSeal(c.keys, keys[at[j]], e) &&
			e.Dev == st.Dev && e.Inode == st.Ino && e.Size == uint64(st.Size) &&
			e.MtimeNs == st.Mtim.Nano() && e.CtimeNs == st.Ctim.Nano() {
			hits[at[j]] = e
		}
	}
}

// cacheKeep notes that file key stays in the cache, with a new entry when
// e is set: stamped with the capture's removal generation and sealed
// here, beside the other readers, and written once its chunks are indexed
// (writeCacheEarly, updateCache).
func (c *capturer) cacheKeep(key blob.ID, e *index.FileEntry) {
	var put capPut
	if e != nil {
		put.key, put.e = key, *e
		put.e.Gen = c.cacheGen
		put.e.Seal = capSeal(c.keys, key, &put.e)
		put.e.Content = nil // kept in cacheIDs instead
	}
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.cacheSeen.add(key)
	if e != nil {
		put.ids = c.cacheIDs.add(e.Content)
		c.cachePuts.add(put)
	}
}

// capPut is a file cache entry to write under key; its content ids are
// ids in the capture's cacheIDs.
type capPut struct {
	key blob.ID
	e   index.FileEntry
	ids capIDRef
}

// capIDs holds the content ids of the entries a capture will write, in
// chunks without pointers: with a slice of its own in each of 100,000
// entries, every garbage collection of a first capture traced 100,000
// more objects.
type capIDs struct {
	chunks [][]blob.ID
}

// capIDRef says where one entry's ids are in a capIDs.
type capIDRef struct{ chunk, off, n int32 }

// add copies ids in, contiguously, and returns where they are.
func (a *capIDs) add(ids []blob.ID) capIDRef {
	last := len(a.chunks) - 1
	if last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < len(ids) {
		a.chunks = append(a.chunks, make([]blob.ID, 0, max(capChunk, len(ids))))
		last++
	}
	ch := &a.chunks[last]
	ref := capIDRef{chunk: int32(last), off: int32(len(*ch)), n: int32(len(ids))}
	*ch = append(*ch, ids...)
	return ref
}

// at returns the ids ref points to.
func (a *capIDs) at(ref capIDRef) []blob.ID {
	return a.chunks[ref.chunk][ref.off : ref.off+ref.n : ref.off+ref.n]
}

// capChunked is an append-only list kept in chunks of fixed size, so that
// growing it neither copies it nor briefly needs twice its memory (a
// capture of 100,000 files notes 100,000 cache entries).
type capChunked[T any] struct {
	chunks [][]T
	n      int
}

const capChunk = 4096

func (l *capChunked[T]) add(v T) {
	if l.n%capChunk == 0 {
		l.chunks = append(l.chunks, make([]T, 0, capChunk))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, v)
	l.n++
}

func (l *capChunked[T]) at(i int) *T { return &l.chunks[i/capChunk][i%capChunk] }

// cached fills n, file name of d, from its cache entry f.hit instead of
// reading the file.
func (c *capturer) cached(d *capDir, n *Node, name string, f capFile) {
	e := f.hit
	n.Content = e.Content
	if e.Xattrs { // else none: adding one would have moved the ctime
		var err error
		if n.Xattrs, err = capXattrsAt(d.h.fd, name); err != nil {
			c.record(d.errPath(name), err)
		}
	}
	if e.Gen == c.cacheGen {
		c.cacheKeep(f.key, nil)
	} else {
		c.cacheKeep(f.key, e) // its chunks were looked up one by one: stamp it anew
	}
	c.bytes.Add(n.Size)
	c.o.Progress.Done(1, n.Size)
}

// settled reports whether a file whose last change (of content, mtime, or
// of inode, ctime) stat st shows is old enough to cache: a file changed
// again within the timestamps' granularity would otherwise look unchanged
// (git's "racily clean"). On a local filesystem whose ctimes have a
// sub-second part the granularity is a kernel clock tick (at most 10 ms),
// so capFineRacyWindow is ample; elsewhere timestamps may be whole seconds
// or set by another machine's clock, and capRacyWindow applies.
func (c *capturer) settled(d *capDir, st *unix.Stat_t) bool {
	last := max(st.Mtim.Nano(), st.Ctim.Nano())
	if d.fineTimes && st.Ctim.Nsec != 0 {
		return last < c.racyFineNs
	}
	return last < c.racyNs
}

// capFineTimes reports whether the directory open as fd is on a local
// filesystem that keeps nanosecond timestamps.
func capFineTimes(fd int) bool {
	var fs unix.Statfs_t
	if unix.Fstatfs(fd, &fs) != nil {
		return false
	}
	switch uint32(fs.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.BCACHEFS_SUPER_MAGIC, capZFSMagic:
		return true
	}
	return false
}

// capZFSMagic is OpenZFS's statfs type (not in x/sys/unix).
const capZFSMagic = 0x2fc12fc1

// capCacheEntry is the cache entry of a file read with stat st into ids.
func capCacheEntry(st *unix.Stat_t, xattrs bool, ids []blob.ID) *index.FileEntry {
	return &index.FileEntry{Dev: st.Dev, Inode: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(), Xattrs: xattrs, Content: ids}
}

// writeCacheEarly runs once the readers are done, beside the final flush.
// It sorts the new entries by key and writes those whose chunks are all
// in the local index already (none is in the repository's unindexed set),
// which on a large capture is all but the last index object's; the rest
// wait for updateCache, after the manifest. Bbolt has one writer, so the
// flush's last index apply may wait for one batch; the flush's packing
// and uploads go on beside it. A failure is logged and leaves every entry
// to updateCache.
func (c *capturer) writeCacheEarly() {
	defer close(c.cacheEarly)
	puts := &c.cachePuts
	order := make([]int32, puts.n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(puts.at(int(a)).key[:], puts.at(int(b)).key[:]) })
	unindexed := c.r.Unindexed(c.o.tier(), blob.Data)
	ready, later := make([]int32, 0, len(order)), []int32(nil)
	for _, i := range order {
		if capAnyIn(c.cacheIDs.at(puts.at(int(i)).ids), unindexed) {
			later = append(later, i)
		} else {
			ready = append(ready, i)
		}
	}
	c.cacheLater = later
	if c.putCache(ready) != nil {
		c.cacheLater = order // tried again, whole, after the manifest
	}
}

// capAnyIn reports whether any of ids is in set.
func capAnyIn(ids []blob.ID, set map[blob.ID]struct{}) bool {
	for _, id := range ids {
		if _, ok := set[id]; ok {
			return true
		}
	}
	return false
}

// capCacheBatch is the number of entries written per transaction.
const capCacheBatch = 20000

// putCache writes the new entries order (indexes into c.cachePuts, in key
// order) in batches, logging a failure.
func (c *capturer) putCache(order []int32) error {
	puts := &c.cachePuts
	recs := make([]index.FileCacheRecord, 0, min(len(order), capCacheBatch))
	for len(order) > 0 {
		n := min(len(order), capCacheBatch)
		recs = recs[:0]
		for _, i := range order[:n] {
			p := puts.at(int(i))
			e := p.e
			e.Content = c.cacheIDs.at(p.ids)
			recs = append(recs, index.FileCacheRecord{Path: p.key[:], Entry: e})
		}
		if err := c.o.Cache.FileCachePut(c.wsKey, recs); err != nil {
			slog.Warn("capture: updating the file cache failed; the next capture reads more", "err", err)
			return err
		}
		order = order[n:]
	}
	return nil
}

// updateCache writes the new entries writeCacheEarly left (their chunks
// were indexed by the final flush) and drops those of files this capture
// did not keep (gone, excluded, changed, or too recently modified to
// trust). It runs after the manifest is saved; a failure only makes the
// next capture read more, so it is logged, not returned.
func (c *capturer) updateCache() {
	if c.o.Cache == nil {
		return
	}
	<-c.cacheEarly
	if c.putCache(c.cacheLater) != nil {
		return
	}
	c.cachePuts, c.cacheIDs = capChunked[capPut]{}, capIDs{}
	// Every file key this capture kept is in the cache now (found by its
	// lookup or just written), so a cache of no more entries than that
	// holds none to drop: an unchanged tree's keys need no sorting.
	if n, err := c.o.Cache.FileCacheCount(c.wsKey); err == nil && n <= c.cacheSeen.n {
		c.cacheSeen = capChunked[blob.ID]{}
		return
	}
	seen := make([]blob.ID, c.cacheSeen.n)
	for i := range seen {
		seen[i] = *c.cacheSeen.at(i)
	}
	c.cacheSeen = capChunked[blob.ID]{}
	slices.SortFunc(seen, func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
	_, err := c.o.Cache.FileCachePrune(c.wsKey, func(k []byte) bool {
		_, found := slices.BinarySearchFunc(seen, k, func(id blob.ID, k []byte) int { return bytes.Compare(id[:], k) })
		return found
	})
	if err != nil {
		slog.Warn("capture: pruning the file cache failed", "err", err)
	}
}
