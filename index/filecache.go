package index

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// The file cache lets an incremental capture skip reading a file whose
// metadata has not changed since the last capture. It lives in the bucket
// "filecache" of the local index DB, with one nested bucket per workspace
// key and one entry per file key; both keys are opaque to this package.
// The snapshot package passes keyed digests of the workspace id and of the
// file's path, so the cache, like the rest of the DB, holds no names; it
// makes a file's key start with its directory's, so one directory's
// entries sit together and FileCacheLookup reads them in one sweep.
//
// Entries are hints, never trusted alone. Each carries a seal, the
// caller's keyed digest of the entry, which the caller checks; and
// FileCacheLookup returns an entry only when its chunks are indexed. That
// check is cheap through the removal generation: a counter in the meta
// bucket that moves on whenever blob entries leave the DB (a rebuild, or
// Drop after a prune). An entry is stamped with the generation at which
// its chunks were known to be indexed; while the counter still has that
// value none can have left, and otherwise each chunk is looked up. The
// bucket is created on first use and is left alone by index rebuilds.
var bucketFileCache = []byte("filecache")

// FileEntry is what the file cache remembers about one file.
type FileEntry struct {
	Dev, Inode, Size uint64
	MtimeNs, CtimeNs int64
	// Xattrs: the file had extended attributes the capture records (their
	// values are not cached; setting one moves the ctime).
	Xattrs bool
	// Gen is the removal generation at which every chunk in Content was
	// indexed (FileCacheGen, read before the chunks were looked up or saved).
	Gen uint64
	// Seal is the caller's keyed digest of the entry, stored and returned
	// as it is: the cache cannot tell a forged entry, the caller can.
	Seal    blob.ID
	Content []blob.ID // the file's data blobs, in order
}

// FileCacheRecord is one file cache entry to store.
type FileCacheRecord struct {
	Path  []byte // opaque file key, at most bolt.MaxKeySize bytes
	Entry FileEntry
}

// An entry is dev, inode, size, mtime, ctime, gen (u64 LE each), a flags
// byte (1: Xattrs), the seal, then the content ids.
const fileEntryFixed = 6*8 + 1 + blob.IDSize

const fileEntryXattrs = 1

func encodeFileEntry(e *FileEntry) []byte {
	v := make([]byte, 0, fileEntryFixed+len(e.Content)*blob.IDSize)
	v = binary.LittleEndian.AppendUint64(v, e.Dev)
	v = binary.LittleEndian.AppendUint64(v, e.Inode)
	v = binary.LittleEndian.AppendUint64(v, e.Size)
	v = binary.LittleEndian.AppendUint64(v, uint64(e.MtimeNs))
	v = binary.LittleEndian.AppendUint64(v, uint64(e.CtimeNs))
	v = binary.LittleEndian.AppendUint64(v, e.Gen)
	var flags byte
	if e.Xattrs {
		flags |= fileEntryXattrs
	}
	v = append(v, flags)
	v = append(v, e.Seal[:]...)
	for _, id := range e.Content {
		v = append(v, id[:]...)
	}
	return v
}

func decodeFileEntry(v []byte) (FileEntry, error) {
	var ids idArena
	return ids.decodeFileEntry(v)
}

// idArena hands out the content id slices of decoded entries from
// shared arrays: one allocation for many entries instead of one each.
type idArena struct{ free []blob.ID }

func (a *idArena) take(n int) []blob.ID {
	if len(a.free) < n {
		a.free = make([]blob.ID, max(n, 256))
	}
	ids := a.free[:n:n]
	a.free = a.free[n:]
	return ids
}

func (a *idArena) decodeFileEntry(v []byte) (FileEntry, error) {
	if len(v) < fileEntryFixed || (len(v)-fileEntryFixed)%blob.IDSize != 0 || v[48]&^fileEntryXattrs != 0 {
		return FileEntry{}, fmt.Errorf("%w: file cache entry of %d bytes", ErrCorrupt, len(v))
	}
	e := FileEntry{
		Dev:     binary.LittleEndian.Uint64(v),
		Inode:   binary.LittleEndian.Uint64(v[8:]),
		Size:    binary.LittleEndian.Uint64(v[16:]),
		MtimeNs: int64(binary.LittleEndian.Uint64(v[24:])),
		CtimeNs: int64(binary.LittleEndian.Uint64(v[32:])),
		Gen:     binary.LittleEndian.Uint64(v[40:]),
		Xattrs:  v[48]&fileEntryXattrs != 0,
		Seal:    blob.ID(v[49:]),
	}
	if n := (len(v) - fileEntryFixed) / blob.IDSize; n > 0 {
		e.Content = a.take(n)
		for i := range e.Content {
			e.Content[i] = blob.ID(v[fileEntryFixed+i*blob.IDSize:])
		}
	}
	return e, nil
}

// removalGen is the DB's removal generation; known is false (and gen 0)
// when the DB has none: a new file, or one an older lifeboat, which kept
// no count, rebuilt. Then no entry is trusted by its generation.
func removalGen(tx *bolt.Tx) (gen uint64, known bool) {
	if m := tx.Bucket(bucketMeta); m != nil {
		if v := m.Get(keyRemovals); len(v) == 8 {
			return binary.LittleEndian.Uint64(v), true
		}
	}
	return 0, false
}

// nextRemovalGen is the generation after the DB's. Where it has none, the
// count starts again at a random value, so no entry stamped before it was
// lost (which may name blobs gone since) matches a later one.
func nextRemovalGen(tx *bolt.Tx) uint64 {
	if gen, ok := removalGen(tx); ok {
		return gen + 1
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return binary.LittleEndian.Uint64(b[:])>>1 | 1
}

// bumpRemovalGen moves the removal generation on; called in every
// transaction that deletes blob entries.
func bumpRemovalGen(tx *bolt.Tx) error {
	return tx.Bucket(bucketMeta).Put(keyRemovals, binary.LittleEndian.AppendUint64(nil, nextRemovalGen(tx)))
}

// FileCacheGen returns the removal generation. A capture reads it before
// it looks up or saves any chunk and stamps the entries it writes with it.
func (d *DB) FileCacheGen() (gen uint64, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		gen, _ = removalGen(tx)
		return nil
	})
	return gen, err
}

// FileCacheQuery is one file of a FileCacheLookup.
type FileCacheQuery struct {
	Key   []byte    // the file key
	Entry FileEntry // set with Found
	Found bool
}

// lookupNextBeforeSeek: FileCacheLookup steps a cursor this many entries
// towards the next key before it seeks from the root instead.
const lookupNextBeforeSeek = 8

// FileCacheLookup looks up the files q of workspace key ws in one read
// transaction, in key order, and sets Found for each entry that exists,
// decodes, and whose chunks are indexed as data blobs of tier t: its Gen
// is the current removal generation, or every chunk is in the DB and their
// plain lengths add up to the entry's size. An entry that does not decode
// is passed over as not found. The caller still checks Seal.
func (d *DB) FileCacheLookup(ws string, t blob.Tier, q []FileCacheQuery) error {
	if len(q) == 0 {
		return nil
	}
	order := make([]int32, len(q))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(q[a].Key, q[b].Key) })
	return d.db.View(func(tx *bolt.Tx) error {
		b := fileCacheBucket(tx, ws)
		if b == nil {
			return nil
		}
		gen, known := removalGen(tx)
		blobs := tx.Bucket(bucketBlobs)
		var ids idArena
		c := b.Cursor()
		k, v := c.Seek(q[order[0]].Key)
		for _, i := range order {
			want := q[i].Key
			for n := 0; k != nil && bytes.Compare(k, want) < 0; n++ {
				if n == lookupNextBeforeSeek {
					k, v = c.Seek(want)
					break
				}
				k, v = c.Next()
			}
			if k == nil || !bytes.Equal(k, want) {
				continue
			}
			e, err := ids.decodeFileEntry(v)
			if err != nil || len(e.Content) == 0 {
				continue
			}
			if (!known || e.Gen != gen) && !chunksIndexed(blobs, t, &e) {
				continue
			}
			q[i].Entry, q[i].Found = e, true
		}
		return nil
	})
}

// chunksIndexed reports whether every chunk of e is an indexed data blob
// of tier t and their plain lengths add up to e's size.
func chunksIndexed(blobs *bolt.Bucket, t blob.Tier, e *FileEntry) bool {
	var total uint64
	for _, id := range e.Content {
		k := blobKey(t, blob.Data, id)
		loc := blobs.Get(k)
		if loc == nil {
			return false
		}
		l, err := decodeLoc(k, loc)
		if err != nil {
			return false
		}
		total += uint64(l.PlainLen)
	}
	return total == e.Size
}

// FileCacheGet returns the entry for file key path of workspace key ws.
func (d *DB) FileCacheGet(ws string, path []byte) (e FileEntry, ok bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		b := fileCacheBucket(tx, ws)
		if b == nil {
			return nil
		}
		v := b.Get(path)
		if v == nil {
			return nil
		}
		e, err = decodeFileEntry(v)
		ok = err == nil
		return err
	})
	return e, ok, err
}

func fileCacheBucket(tx *bolt.Tx, ws string) *bolt.Bucket {
	top := tx.Bucket(bucketFileCache)
	if top == nil {
		return nil
	}
	return top.Bucket([]byte(ws))
}

// FileCachePut stores recs under workspace key ws in one transaction (one
// fsync); callers batch many files per call.
func (d *DB) FileCachePut(ws string, recs []FileCacheRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if ws == "" || len(ws) > bolt.MaxKeySize {
		return fmt.Errorf("file cache: workspace key of %d bytes", len(ws))
	}
	return d.db.Update(func(tx *bolt.Tx) error {
		top, err := tx.CreateBucketIfNotExists(bucketFileCache)
		if err != nil {
			return err
		}
		b, err := top.CreateBucketIfNotExists([]byte(ws))
		if err != nil {
			return err
		}
		b.FillPercent = fillPercent
		for i := range recs {
			if err := b.Put(recs[i].Path, encodeFileEntry(&recs[i].Entry)); err != nil {
				return fmt.Errorf("file cache: %w", err)
			}
		}
		return nil
	})
}

// FileCachePrune deletes every entry of workspace key ws whose file key
// keep rejects, in one transaction, and returns how many it deleted. When
// keep accepts them all it writes nothing (no commit, no fsync).
func (d *DB) FileCachePrune(ws string, keep func(path []byte) bool) (int, error) {
	stale := false
	err := d.db.View(func(tx *bolt.Tx) error {
		if b := fileCacheBucket(tx, ws); b != nil {
			c := b.Cursor()
			for k, _ := c.First(); k != nil && !stale; k, _ = c.Next() {
				stale = !keep(k)
			}
		}
		return nil
	})
	if err != nil || !stale {
		return 0, err
	}
	var n int
	err = d.db.Update(func(tx *bolt.Tx) error {
		b := fileCacheBucket(tx, ws)
		if b == nil {
			return nil
		}
		var drop [][]byte
		err := b.ForEach(func(k, _ []byte) error {
			if !keep(k) {
				drop = append(drop, append([]byte(nil), k...))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		n = len(drop)
		return nil
	})
	return n, err
}

// FileCacheCount returns the number of entries of workspace key ws.
func (d *DB) FileCacheCount(ws string) (int, error) {
	var n int
	err := d.db.View(func(tx *bolt.Tx) error {
		if b := fileCacheBucket(tx, ws); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n, err
}
