package index

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// The file cache lets an incremental capture skip reading a file whose
// metadata has not changed since the last capture. It lives in the bucket
// "filecache" of the local index DB, with one nested bucket per workspace
// key and one entry per file key; both keys are opaque to this package.
// The snapshot package passes keyed digests of the workspace id and of the
// file's path, so the cache, like the rest of the DB, holds no names.
//
// Entries are hints, never trusted alone: the capture checks every chunk
// id against the blob index before reusing one. The bucket is created on
// first use and is left alone by index rebuilds (Sync), for the same
// reason.
var bucketFileCache = []byte("filecache")

// FileEntry is what the file cache remembers about one file.
type FileEntry struct {
	Dev, Inode, Size uint64
	MtimeNs, CtimeNs int64
	// Xattrs: the file had extended attributes the capture records (their
	// values are not cached; setting one moves the ctime).
	Xattrs  bool
	Content []blob.ID // the file's data blobs, in order
}

// FileCacheRecord is one file cache entry to store.
type FileCacheRecord struct {
	Path  []byte // opaque file key, at most bolt.MaxKeySize bytes
	Entry FileEntry
}

// An entry is dev, inode, size, mtime, ctime (u64 LE each), a flags byte
// (1: Xattrs), then the content ids.
const fileEntryFixed = 5*8 + 1

const fileEntryXattrs = 1

func encodeFileEntry(e *FileEntry) []byte {
	v := make([]byte, 0, fileEntryFixed+len(e.Content)*blob.IDSize)
	v = binary.LittleEndian.AppendUint64(v, e.Dev)
	v = binary.LittleEndian.AppendUint64(v, e.Inode)
	v = binary.LittleEndian.AppendUint64(v, e.Size)
	v = binary.LittleEndian.AppendUint64(v, uint64(e.MtimeNs))
	v = binary.LittleEndian.AppendUint64(v, uint64(e.CtimeNs))
	var flags byte
	if e.Xattrs {
		flags |= fileEntryXattrs
	}
	v = append(v, flags)
	for _, id := range e.Content {
		v = append(v, id[:]...)
	}
	return v
}

func decodeFileEntry(v []byte) (FileEntry, error) {
	if len(v) < fileEntryFixed || (len(v)-fileEntryFixed)%blob.IDSize != 0 || v[40]&^fileEntryXattrs != 0 {
		return FileEntry{}, fmt.Errorf("%w: file cache entry of %d bytes", ErrCorrupt, len(v))
	}
	e := FileEntry{
		Dev:     binary.LittleEndian.Uint64(v),
		Inode:   binary.LittleEndian.Uint64(v[8:]),
		Size:    binary.LittleEndian.Uint64(v[16:]),
		MtimeNs: int64(binary.LittleEndian.Uint64(v[24:])),
		CtimeNs: int64(binary.LittleEndian.Uint64(v[32:])),
		Xattrs:  v[40]&fileEntryXattrs != 0,
	}
	if n := (len(v) - fileEntryFixed) / blob.IDSize; n > 0 {
		e.Content = make([]blob.ID, n)
		for i := range e.Content {
			e.Content[i] = blob.ID(v[fileEntryFixed+i*blob.IDSize:])
		}
	}
	return e, nil
}

// FileCacheGetIndexed is FileCacheGet for a capture about to reuse the
// entry: in the same read transaction it checks that every chunk is still
// indexed as a data blob of tier t and that their plain lengths add up to
// the entry's size, so a stale or tampered entry cannot attach missing or
// wrong chunks. ok is false when there is no such entry or a check fails.
func (d *DB) FileCacheGetIndexed(ws string, path []byte, t blob.Tier) (e FileEntry, ok bool, err error) {
	err = d.db.View(func(tx *bolt.Tx) error {
		b := fileCacheBucket(tx, ws)
		if b == nil {
			return nil
		}
		v := b.Get(path)
		if v == nil {
			return nil
		}
		if e, err = decodeFileEntry(v); err != nil {
			return err
		}
		blobs := tx.Bucket(bucketBlobs)
		var total uint64
		for _, id := range e.Content {
			k := blobKey(t, blob.Data, id)
			loc := blobs.Get(k)
			if loc == nil {
				return nil
			}
			l, err := decodeLoc(k, loc)
			if err != nil {
				return err
			}
			total += uint64(l.PlainLen)
		}
		ok = len(e.Content) > 0 && total == e.Size
		return nil
	})
	return e, ok, err
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
		for i := range recs {
			if err := b.Put(recs[i].Path, encodeFileEntry(&recs[i].Entry)); err != nil {
				return fmt.Errorf("file cache: %w", err)
			}
		}
		return nil
	})
}

// FileCachePrune deletes every entry of workspace key ws whose file key
// keep rejects, in one transaction, and returns how many it deleted.
func (d *DB) FileCachePrune(ws string, keep func(path []byte) bool) (int, error) {
	var n int
	err := d.db.Update(func(tx *bolt.Tx) error {
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
