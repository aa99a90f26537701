package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// The file cache keeps one record per part of a directory (up to
// MaxNodesPerBlob entries, the parts trees are saved in): the entries of
// the part's regular files that can stand in for reading them, in name
// order. A record's key is the directory's key (a keyed digest: the
// workspace's key is the digest of its id, a directory's key chains its
// parent's key with its name) followed by the part's number, so the cache
// holds no names in its keys and one directory's parts sit together. A
// record is sealed with the tier's key (AEAD), bound to the workspace and
// its key: the names inside are encrypted, and a record the capture did
// not write, or one damaged on disk, does not open and is not used. One
// lookup per part, and a merge of its sorted names with the record's,
// serves all its files. The record also names the part's tree as saved:
// while no blob has left the index since, a part that encodes to that
// tree again takes it as stored, without a lookup of its own. A part
// whose entries all come from its record unchanged, with the same tree,
// is not written again.

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

// capKey is the key of one part's record: the directory's key, then the
// part's number (u32 big-endian).
type capKey [blob.IDSize + 4]byte

func capPartKey(dir blob.ID, part int) capKey {
	var k capKey
	copy(k[:], dir[:])
	binary.BigEndian.PutUint32(k[blob.IDSize:], uint32(part))
	return k
}

// capRecordAAD binds a record to workspace key ws and its own key.
func capRecordAAD(ws string, key []byte) []byte {
	aad := make([]byte, 0, 64+len(ws))
	aad = append(aad, "lifeboat file cache part\x00"...)
	aad = append(append(aad, ws...), 0)
	return append(aad, key...)
}

// capEntry is what the file cache remembers about one file.
type capEntry struct {
	Dev, Inode, Size uint64
	MtimeNs, CtimeNs int64
	// Xattrs: the file had extended attributes the capture records (their
	// values are not cached; setting one moves the ctime).
	Xattrs  bool
	Content []blob.ID // the file's data blobs, in order
}

// capOld is what a part's lookup found of its record.
type capOld struct {
	found bool
	n     int     // entries in the record
	gen   uint64  // the removal generation it was stamped with
	tree  blob.ID // the part's tree when the record was written; zero when not recorded
}

// A record (the plaintext under the seal) is: a version byte (2), the
// removal generation (u64 LE), the part's tree id (32 bytes, zero when
// none), the number of entries (uvarint), then per entry in strictly
// increasing name order: the name's length (uvarint) and bytes, device,
// inode, size, mtime ns, ctime ns (u64 LE each), a flags byte (1: has
// xattrs), the number of chunks (uvarint, at least 1) and their 32-byte
// ids. Version 1, written before, has no tree id; it is read as a record
// without one, and written again as version 2.
const (
	capRecordVersion   = 2
	capRecordVersionV1 = 1
	capEntryXattrs     = 1
)

// capNamed is an entry of a decoded record.
type capNamed struct {
	name []byte
	e    capEntry
}

// appendRecord appends the record of entries (in name order) of a part
// whose tree is tree, stamped with gen, to b.
func appendRecord(b []byte, gen uint64, tree blob.ID, names [][]byte, entries []*capEntry) []byte {
	b = append(b, capRecordVersion)
	b = binary.LittleEndian.AppendUint64(b, gen)
	b = append(b, tree[:]...)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(names[i])))
		b = append(b, names[i]...)
		for _, v := range []uint64{e.Dev, e.Inode, e.Size, uint64(e.MtimeNs), uint64(e.CtimeNs)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		var flags byte
		if e.Xattrs {
			flags |= capEntryXattrs
		}
		b = append(b, flags)
		b = binary.AppendUvarint(b, uint64(len(e.Content)))
		for _, id := range e.Content {
			b = append(b, id[:]...)
		}
	}
	return b
}

var errCapRecord = errors.New("malformed file cache record")

// capUvarint is binary.Uvarint refusing (k 0) a longer encoding than
// needed, so a record has one encoding only.
func capUvarint(b []byte) (uint64, int) {
	v, k := binary.Uvarint(b)
	if k > 1 && b[k-1] == 0 {
		return 0, 0
	}
	return v, k
}

// decodeRecord decodes a record, of either version. Names alias rec.
func decodeRecord(rec []byte) (gen uint64, tree blob.ID, out []capNamed, err error) {
	head := 9
	if len(rec) > 0 && rec[0] == capRecordVersion {
		head += blob.IDSize
	}
	if len(rec) < head || rec[0] != capRecordVersion && rec[0] != capRecordVersionV1 {
		return 0, blob.ID{}, nil, errCapRecord
	}
	gen = binary.LittleEndian.Uint64(rec[1:])
	copy(tree[:], rec[9:head])
	b := rec[head:]
	n, k := capUvarint(b)
	if k <= 0 || n > uint64(len(b)) { // every entry takes more than a byte
		return 0, blob.ID{}, nil, errCapRecord
	}
	b = b[k:]
	out = make([]capNamed, n)
	ids := make([]blob.ID, 0, len(b)/blob.IDSize) // never grown: Content slices stay put
	for i := range out {
		l, k := capUvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) {
			return 0, blob.ID{}, nil, errCapRecord
		}
		name := b[k : k+int(l)]
		if i > 0 && bytes.Compare(out[i-1].name, name) >= 0 {
			return 0, blob.ID{}, nil, errCapRecord
		}
		b = b[k+int(l):]
		if len(b) < 5*8+1 || b[40]&^capEntryXattrs != 0 {
			return 0, blob.ID{}, nil, errCapRecord
		}
		e := capEntry{Dev: binary.LittleEndian.Uint64(b), Inode: binary.LittleEndian.Uint64(b[8:]),
			Size: binary.LittleEndian.Uint64(b[16:]), MtimeNs: int64(binary.LittleEndian.Uint64(b[24:])),
			CtimeNs: int64(binary.LittleEndian.Uint64(b[32:])), Xattrs: b[40]&capEntryXattrs != 0}
		b = b[41:]
		nids, k := capUvarint(b)
		if k <= 0 || nids == 0 || nids > uint64(len(b)-k)/blob.IDSize {
			return 0, blob.ID{}, nil, errCapRecord
		}
		b = b[k:]
		start := len(ids)
		for range nids {
			ids = append(ids, blob.ID(b[:blob.IDSize]))
			b = b[blob.IDSize:]
		}
		e.Content = ids[start:len(ids):len(ids)]
		out[i] = capNamed{name: name, e: e}
	}
	if len(b) != 0 {
		return 0, blob.ID{}, nil, errCapRecord
	}
	return gen, tree, out, nil
}

// cacheLookup sets, for the entries names of part p of d that sts says
// are regular files with content, the cache entries that can stand in for
// reading them: in the part's record, which opens under this workspace's
// key, with chunks still indexed, and device, inode, size, mtime and ctime
// as stat'ed now. It returns what it found of the record.
func (c *capturer) cacheLookup(d *capDir, p int, names []string, sts []unix.Stat_t, hits []*capEntry) capOld {
	want := false
	for i := range names {
		want = want || sts[i].Mode&unix.S_IFMT == unix.S_IFREG && sts[i].Size > 0
	}
	if !want {
		return capOld{}
	}
	key := capPartKey(d.key, p)
	var plain []byte
	var openErr error
	err := c.o.Cache.FileCacheGet(c.wsKey, key[:], func(v []byte) {
		if v != nil {
			plain, openErr = c.keys.Open(repo.GetBuffer(len(v)), v, capRecordAAD(c.wsKey, key[:]))
		}
	})
	if err != nil {
		repo.Warnf(c.ctx, "capture: the file cache failed; files are read instead: %v", err)
		return capOld{}
	}
	if plain == nil || openErr != nil {
		return capOld{} // none, or not ours: its entries are not used, and it is replaced
	}
	// The record's names alias plain, and are not used past this lookup;
	// its entries are decoded out of it.
	defer repo.PutBuffer(plain)
	gen, tree, rec, err := decodeRecord(plain)
	if err != nil {
		return capOld{}
	}
	old := capOld{found: true, n: len(rec), gen: gen, tree: tree}
	var stale []repo.FileChunks // entries to check chunk by chunk
	var staleAt []int
	j := 0
	for i, name := range names {
		st := &sts[i]
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size == 0 {
			continue
		}
		for j < len(rec) && string(rec[j].name) < name {
			j++
		}
		if j == len(rec) {
			break
		}
		e := &rec[j].e
		if string(rec[j].name) != name || e.Dev != st.Dev || e.Inode != st.Ino || e.Size != uint64(st.Size) ||
			e.MtimeNs != st.Mtim.Nano() || e.CtimeNs != st.Ctim.Nano() {
			continue
		}
		hits[i] = e
		if !c.genCurrent(gen) {
			stale = append(stale, repo.FileChunks{IDs: e.Content, Size: e.Size})
			staleAt = append(staleAt, i)
		}
	}
	if len(stale) > 0 {
		if err := c.o.Cache.FileCacheIndexed(c.o.tier(), stale); err != nil {
			repo.Warnf(c.ctx, "capture: the file cache failed; files are read instead: %v", err)
		}
		for k, q := range stale {
			if !q.Indexed {
				hits[staleAt[k]] = nil
			}
		}
	}
	return old
}

// genCurrent reports whether a record stamped with removal generation gen
// names only chunks still indexed: no blob has left the index since (a
// generation of 0 is unknown).
func (c *capturer) genCurrent(gen uint64) bool { return c.cacheGen != 0 && gen == c.cacheGen }

// cacheNote records e, the cache entry of entry i of p: new, or a hit
// (fresh false) from p's record.
func (c *capturer) cacheNote(p *capPart, i int, e *capEntry, fresh bool) {
	p.cache[i] = e
	if fresh || !c.genCurrent(p.old.gen) {
		p.fresh.Store(true) // (a hit from a record of an older generation is stamped anew)
	}
}

// capCached is a part's entries for its record: those of files in the
// snapshot with a cache entry, in name order.
type capCached struct {
	names   [][]byte
	entries []*capEntry
}

// cachedEntries takes p's cache entries for its record, pairing p.cache[i]
// with p.nodes[i], before the nodes are packed for the tree. A part
// without entries keeps no record: it returns nil.
func (c *capturer) cachedEntries(p *capPart) *capCached {
	if p.cache == nil {
		return nil
	}
	kept := 0 // entries of files in the snapshot
	for i, e := range p.cache {
		if e != nil && p.nodes[i].Type != "" {
			kept++
		}
	}
	var k *capCached
	if kept > 0 {
		k = &capCached{names: make([][]byte, 0, kept), entries: make([]*capEntry, 0, kept)}
		for i, e := range p.cache {
			if e != nil && p.nodes[i].Type != "" {
				k.names = append(k.names, p.nodes[i].Name)
				k.entries = append(k.entries, e)
			}
		}
	}
	p.cache = nil
	return k
}

// knownTree reports whether p's record names a tree that is indexed and
// may be reused: one stamped with the current removal generation, after
// the capture that saved that tree (records are written once the
// manifest is saved), and no blob has left the index since.
func (c *capturer) knownTree(p *capPart) bool {
	return p.old.found && !p.old.tree.IsNull() && c.genCurrent(p.old.gen)
}

// cachePart writes the record of p, whose tree is tree, with its entries
// k (once the manifest is saved) unless its record is the same: the same
// entries, each from the record unchanged and of the current generation,
// and the same tree. It keeps the record's key from the prune.
func (c *capturer) cachePart(p *capPart, k *capCached, tree blob.ID) {
	key := capPartKey(p.dir.key, p.idx)
	var rec []byte
	if p.fresh.Load() || !p.old.found || p.old.n != len(k.entries) || p.old.tree != tree {
		plain := appendRecord(getCapBuf(), c.cacheGen, tree, k.names, k.entries)
		rec = c.keys.Seal(nil, plain, capRecordAAD(c.wsKey, key[:]))
		putCapBuf(plain)
	}
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	c.cacheSeen.add(key)
	if rec != nil {
		c.cachePuts.add(capPut{key: key, rec: rec})
	}
}

// capPut is a part's record to write under key.
type capPut struct {
	key capKey
	rec []byte
}

// getCapBuf and putCapBuf recycle the buffers records are encoded in.
func getCapBuf() []byte  { return repo.GetBuffer(4 << 10) }
func putCapBuf(b []byte) { repo.PutBuffer(b) }

// capChunked is an append-only list kept in chunks of fixed size, so that
// growing it neither copies it nor briefly needs twice its memory (a
// capture notes a key per directory part, and a record per part to write).
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

// cached fills n, entry i of part, file name of d, from its cache entry
// f.hit instead of reading the file.
func (c *capturer) cached(d *capDir, part *capPart, i int, n *snapshot.Node, name string, f capFile) {
	e := f.hit
	n.Content = e.Content
	if e.Xattrs { // else none: adding one would have moved the ctime
		var err error
		if n.Xattrs, err = capXattrsAt(d.h.fd, name); err != nil {
			c.record(d.errPath(name), err)
		}
	}
	c.cacheNote(part, i, e, false) // (part.cache[i] is e already)
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
func capCacheEntry(st *unix.Stat_t, xattrs bool, ids []blob.ID) *capEntry {
	return &capEntry{Dev: st.Dev, Inode: st.Ino, Size: uint64(st.Size),
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(), Xattrs: xattrs, Content: ids}
}

// sortCache sends the order by key of the new records on c.cacheOrder.
// It runs once the readers are done, beside the final flush, which it
// does not need: only writing the entries must wait for it.
func (c *capturer) sortCache() {
	c.cacheOrder <- capSortByKey(&c.cachePuts)
}

// capSortByKey returns the indexes of puts in key order. Keys start with
// a keyed digest, the same for one directory's parts and evenly spread
// otherwise, so a counting sort on their first two bytes leaves buckets of
// about one directory each for a comparison sort to finish.
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

// capCacheBatch is the number of records written per transaction.
const capCacheBatch = 4096

// updateCache writes the new records in batches and drops those of parts
// this capture did not keep (gone, or without a file to cache). It runs
// after the manifest is saved, so no record names chunks that are not
// durable and indexed; a failure only makes the next capture read more,
// so it is logged, not returned.
func (c *capturer) updateCache() {
	if c.o.Cache == nil {
		return
	}
	order := <-c.cacheOrder
	puts := &c.cachePuts
	recs := make([]repo.FileCacheRecord, 0, min(len(order), capCacheBatch))
	for len(order) > 0 {
		n := min(len(order), capCacheBatch)
		recs = recs[:0]
		for _, i := range order[:n] {
			p := puts.at(int(i))
			recs = append(recs, repo.FileCacheRecord{Key: p.key[:], Value: p.rec})
		}
		if err := c.o.Cache.FileCachePut(c.wsKey, recs); err != nil {
			repo.Warnf(c.ctx, "capture: updating the file cache failed; the next capture reads more: %v", err)
			return
		}
		order = order[n:]
	}
	c.cachePuts = capChunked[capPut]{}
	// Every part key this capture kept is in the cache now (found by its
	// lookup or just written), so a cache of no more records than that
	// holds none to drop: an unchanged tree's keys need no sorting.
	if n, err := c.o.Cache.FileCacheCount(c.wsKey); err == nil && n <= c.cacheSeen.n {
		c.cacheSeen = capChunked[capKey]{}
		return
	}
	seen := make([]capKey, c.cacheSeen.n)
	for i := range seen {
		seen[i] = *c.cacheSeen.at(i)
	}
	c.cacheSeen = capChunked[capKey]{}
	slices.SortFunc(seen, func(a, b capKey) int { return bytes.Compare(a[:], b[:]) })
	_, err := c.o.Cache.FileCachePrune(c.wsKey, func(k []byte) bool {
		_, found := slices.BinarySearchFunc(seen, k, func(id capKey, k []byte) int { return bytes.Compare(id[:], k) })
		return found
	})
	if err != nil {
		repo.Warnf(c.ctx, "capture: pruning the file cache failed: %v", err)
	}
}
