package index

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// The file cache lets an incremental capture skip reading files whose
// metadata has not changed since the last capture. It lives in the bucket
// "filecache2" of the local index DB, with one nested bucket per workspace
// key and one record per key; keys and records are opaque to this
// package. The snapshot package keeps one record per part of a directory
// (up to 8,192 entries), keyed by a keyed digest of the directory's path
// and the part's number, and seals it with the workspace tier's key, so
// the DB holds no names in the clear.
//
// Records are hints, never trusted alone: the caller checks the seal, and
// checks that the chunks a record names are indexed. That check is cheap
// through the removal generation: a counter in the meta bucket that moves
// on whenever blob entries leave the DB (a rebuild, or Drop after a
// prune). A record is stamped with the generation at which its chunks were
// known to be indexed; while the counter still has that value none can
// have left, and otherwise each chunk is looked up (FileCacheIndexed). The
// bucket is created on first use and is left alone by index rebuilds.
// ("filecache", version 1's bucket of one entry per file, is deleted by
// the first write.)
var (
	bucketFileCache   = []byte("filecache2")
	bucketFileCacheV1 = []byte("filecache")
)

// FileCacheRecord is one file cache record to store.
type FileCacheRecord struct {
	Key   []byte // at most bolt.MaxKeySize bytes
	Value []byte
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
	err = d.view(func(tx *bolt.Tx) error {
		gen, _ = removalGen(tx)
		return nil
	})
	return gen, err
}

// FileCacheGet calls fn with the record stored under key for workspace
// key ws, or nil when there is none, inside a read transaction: fn must
// not keep v.
func (d *DB) FileCacheGet(ws string, key []byte, fn func(v []byte)) error {
	return d.view(func(tx *bolt.Tx) error {
		var v []byte
		if b := fileCacheBucket(tx, ws); b != nil {
			v = b.Get(key)
		}
		fn(v)
		return nil
	})
}

// FileChunks is one file of a FileCacheIndexed query.
type FileChunks struct {
	IDs     []blob.ID
	Size    uint64
	Indexed bool // set by FileCacheIndexed
}

// FileCacheIndexed sets Indexed for each file of q whose chunks are all
// indexed data blobs of tier t with plain lengths adding up to its Size,
// in one read transaction: the check for records stamped with an older
// removal generation.
func (d *DB) FileCacheIndexed(t blob.Tier, q []FileChunks) error {
	return d.view(func(tx *bolt.Tx) error {
		u := newUsable(tx)
		for i := range q {
			d.lookups.Add(int64(len(q[i].IDs)))
			q[i].Indexed = len(q[i].IDs) > 0 && chunksIndexed(u, t, q[i].IDs, q[i].Size)
			d.touched(tx, lookupUnits*len(q[i].IDs))
		}
		return nil
	})
}

// chunksIndexed reports whether every chunk of ids is an indexed data blob
// of tier t with a place that may be reused (not in a pack known to be
// gone or condemned: unusable.go) and their plain lengths add up to size.
func chunksIndexed(u usable, t blob.Tier, ids []blob.ID, size uint64) bool {
	var total uint64
	for _, id := range ids {
		k := blobKey(t, blob.Data, id)
		loc := u.place(k)
		if loc == nil {
			return false
		}
		l, err := decodeLoc(k, loc)
		if err != nil {
			return false
		}
		total += uint64(l.PlainLen)
	}
	return total == size
}

func fileCacheBucket(tx *bolt.Tx, ws string) *bolt.Bucket {
	top := tx.Bucket(bucketFileCache)
	if top == nil {
		return nil
	}
	return top.Bucket([]byte(ws))
}

// FileCachePut stores recs under workspace key ws in one transaction (one
// fsync); callers batch many records per call.
func (d *DB) FileCachePut(ws string, recs []FileCacheRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if ws == "" || len(ws) > bolt.MaxKeySize {
		return fmt.Errorf("file cache: workspace key of %d bytes", len(ws))
	}
	return d.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketFileCacheV1) != nil {
			if err := tx.DeleteBucket(bucketFileCacheV1); err != nil {
				return err
			}
		}
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
			if err := b.Put(recs[i].Key, recs[i].Value); err != nil {
				return fmt.Errorf("file cache: %w", err)
			}
		}
		return nil
	})
}

// FileCachePrune deletes every record of workspace key ws whose key keep
// rejects, in one transaction, and returns how many it deleted. When
// keep accepts them all it writes nothing (no commit, no fsync).
func (d *DB) FileCachePrune(ws string, keep func(path []byte) bool) (int, error) {
	stale := false
	err := d.view(func(tx *bolt.Tx) error {
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
	err = d.update(func(tx *bolt.Tx) error {
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

// FileCacheCount returns the number of records of workspace key ws.
func (d *DB) FileCacheCount(ws string) (int, error) {
	var n int
	err := d.view(func(tx *bolt.Tx) error {
		if b := fileCacheBucket(tx, ws); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n, err
}
