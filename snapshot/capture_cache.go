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
	var buf [blob.IDSize + 224]byte // most names: no allocation
	return k.BlobID(append(append(buf[:0], parent[:]...), name...))
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
// here, beside the other readers, and written by updateCache once the
// manifest is saved.
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

// sortCache sends the order by key of the new entries on c.cacheOrder.
// It runs once the readers are done, beside the final flush, which it
// does not need: only writing the entries must wait for it.
func (c *capturer) sortCache() {
	c.cacheOrder <- capSortByKey(&c.cachePuts)
}

// capSortByKey returns the indexes of puts in key order. Keys are keyed
// digests, the same first half for one directory's files and evenly
// spread otherwise, so a counting sort on their first two bytes leaves
// buckets of about one directory each for a comparison sort to finish:
// 100,000 entries sort in a few milliseconds instead of 45 ms.
func capSortByKey(puts *capChunked[capPut]) []int32 {
	bucket := func(i int) int { k := &puts.at(i).key; return int(k[0])<<8 | int(k[1]) }
	start := make([]int32, 1<<16+1)
	for i := range puts.n {
		start[bucket(i)+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	order := make([]int32, puts.n)
	next := slices.Clone(start[:1<<16])
	for i := range puts.n {
		b := bucket(i)
		order[next[b]] = int32(i)
		next[b]++
	}
	byKey := func(a, b int32) int { return bytes.Compare(puts.at(int(a)).key[:], puts.at(int(b)).key[:]) }
	for b := range 1 << 16 {
		if start[b+1]-start[b] > 1 {
			slices.SortFunc(order[start[b]:start[b+1]], byKey)
		}
	}
	return order
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
	order := <-c.cacheOrder
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
			return
		}
		order = order[n:]
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
