package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"lifeboat/blob"
	"lifeboat/internal/osutil"
	"lifeboat/pack"
)

// dbVersion changes whenever the DB layout changes; an old file is rebuilt.
// Version 3 added the copies bucket.
const dbVersion = 3

var (
	bucketMeta    = []byte("meta")
	bucketBlobs   = []byte("blobs")   // tier|type|id -> pack id|flags|offset|length|plain length
	bucketPacks   = []byte("packs")   // pack id -> tier|size|entries|entry bytes (see packValue)
	bucketObjects = []byte("objects") // index object id -> tier|state
	bucketCopies  = []byte("copies")  // tier|type|id|pack id -> a blob's other places (copies.go)
	// objpacks and packobjs record which packs each applied index object
	// lists (object id|pack id and pack id|object id, empty values), so
	// that a Sync that finds objects gone drops their packs' places
	// instead of rebuilding (incremental.go).
	bucketObjPacks = []byte("objpacks")
	bucketPackObjs = []byte("packobjs")
	keyVersion     = []byte("version")
	keyRepo        = []byte("repo")
	keyRemovals    = []byte("removals") // the removal generation, u64 LE (filecache.go)
)

// States of an index object in the objects bucket.
const (
	objApplied byte = 1 // its entries are in the blobs bucket
	objLocked  byte = 2 // its tier was locked when seen; apply once unlocked
	objPartial byte = 3 // Apply began but did not finish: some entries may be in
)

// ErrCorrupt marks a DB whose contents do not decode.
var ErrCorrupt = errors.New("local index cache is corrupt")

// errBusy: another process holds the DB file.
var errBusy = errors.New("local index cache is in use by another process")

// Location is where a blob is stored.
type Location struct {
	Pack blob.ID
	pack.Entry
}

// DB is the local bbolt index. It is safe for concurrent use.
type DB struct {
	db      *bolt.DB
	path    string
	private bool // a per-process file, removed by Close

	// The filter of blob keys that spares missing lookups a bbolt
	// transaction (filter.go): nil until enough lookups have missed.
	filterMu sync.Mutex // held by a build and by apply's batches
	filter   atomic.Pointer[blobFilter]
	misses   atomic.Int64
	filterAt atomic.Int64 // the misses that build it (math.MaxInt64: built, or building)

	// syncMu is held by ApplyAll, and by Sync while it lists the objects
	// and decides what to apply.
	syncMu sync.Mutex

	// lookups counts blob lookups (Lookups), for benchmarks.
	lookups atomic.Int64
	// touches counts the work of transactions since the open, in units
	// of resident.go: every residentDropEvery, the mapped pages go.
	touches atomic.Int64

	// damaged is set once a transaction has found the file damaged
	// (damage.go); the file is then removed, and Sync fails.
	damaged    atomic.Bool
	removeOnce sync.Once
}

// Lookups returns how many blob lookups the DB has answered: Lookup,
// LookupUsable and LookupMany count one per id, FileCacheIndexed one per
// chunk it checks.
func (d *DB) Lookups() int64 { return d.lookups.Load() }

// OpenDB opens (or creates) the index cache for repository repoID under
// dir. A file that does not open, or belongs to another repository or
// layout, is replaced by an empty one; Sync then fills it. When another
// process holds the shared file, a private file is used instead.
func OpenDB(dir string, repoID blob.ID) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating index cache directory %s: %w", dir, err)
	}
	removeStalePrivate(dir)
	path := filepath.Join(dir, "index.db")
	d, err := openDBFile(path, repoID)
	if errors.Is(err, errBusy) {
		f, terr := os.CreateTemp(dir, "index-private-*.db")
		if terr != nil {
			return nil, fmt.Errorf("creating private index cache in %s: %w", dir, terr)
		}
		_ = f.Close()
		_ = os.Remove(f.Name())
		d, err = openDBFile(f.Name(), repoID)
		if err != nil {
			// Never fall through to the reset below: the shared file is
			// another process's live cache.
			_ = os.Remove(f.Name())
			return nil, err
		}
		d.private = true
		return d, nil
	}
	if err != nil && !errors.Is(err, errBusy) {
		// Unreadable or foreign: start over.
		_ = os.Remove(path)
		d, err = openDBFile(path, repoID)
	}
	return d, err
}

// removeStalePrivate deletes private index files that no live process
// holds (bbolt keeps an exclusive flock on an open file), left by crashes.
func removeStalePrivate(dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "index-private-*.db"))
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		if osutil.FlockFile(f, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.Remove(name)
		}
		_ = f.Close()
	}
}

func openDBFile(path string, repoID blob.ID) (d *DB, err error) {
	if err := checkDBFileSize(path); err != nil {
		return nil, err
	}
	bdb, err := openBolt(path, &bolt.Options{Timeout: lockTimeout, FreelistType: bolt.FreelistMapType, InitialMmapSize: initialMmapSize})
	if err != nil {
		return nil, err
	}
	bdb.AllocSize = allocSize
	d = &DB{db: bdb, path: path}
	d.filterAt.Store(filterAfterMisses)
	defer func() {
		if r := recover(); r != nil { // bbolt panics on some damaged pages
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
		if err != nil {
			_ = bdb.Close()
			d = nil
		}
	}()
	current := func(tx *bolt.Tx) bool {
		m := tx.Bucket(bucketMeta)
		for _, name := range dbBuckets {
			if tx.Bucket(name) == nil {
				return false
			}
		}
		if tx.Bucket(bucketUnusable) == nil {
			return false
		}
		return bytes.Equal(m.Get(keyVersion), binary.LittleEndian.AppendUint32(nil, dbVersion)) && bytes.Equal(m.Get(keyRepo), repoID[:])
	}
	ok := false
	err = bdb.View(func(tx *bolt.Tx) error { _, known := removalGen(tx); ok = current(tx) && known; return nil })
	if err == nil && !ok { // a new, older or foreign DB; else no write transaction's sync
		err = bdb.Update(func(tx *bolt.Tx) error {
			if !current(tx) {
				return resetTx(tx, repoID)
			}
			if _, known := removalGen(tx); !known { // an older version's DB: start the count
				return bumpRemovalGen(tx)
			}
			return nil
		})
	}
	if err == nil {
		d.dropResident()
	}
	return d, err
}

// dropResident lets go of the pages of the file this process has touched.
// An open reads the meta and free-list pages and the few pages
// openDBFile's checks read, but the first read-write open of a file an older Lifeboat
// wrote (its free list not stored) reads every page in use to rebuild the
// free list, and stores it; on a large index that is the whole file, which
// would otherwise count in this process's memory for as long as it runs
// although most of it is never read again. bbolt maps the file shared and
// read-only, so the pages stay in the page cache, and an access brings one
// back. It runs inside a read transaction: that holds off a writer's
// remap, which would unmap the range (and free its address for any other
// mapping) between reading it and the madvise.
func (d *DB) dropResident() {
	_ = d.view(func(tx *bolt.Tx) error {
		dropMapped(d.db, tx)
		return nil
	})
}

const lockTimeout = 250 * time.Millisecond

// fillPercent is how full bbolt leaves a page it splits while inserting
// (its default is half). Inserts come in key-sorted batches, so fuller
// pages make the file smaller, and a scan of it (a filter build, a drop,
// Verify) reads fewer pages.
const fillPercent = 0.9

// openBolt is bolt.Open with its failures mapped to errBusy or ErrCorrupt.
// A read-write open reads the stored free list (bbolt's default; a file
// without one, as Lifeboat wrote before it stored it, has every page in
// use walked to rebuild it once, and then stored), and bbolt panics, or
// faults in the mapping, on some damaged pages: both become ErrCorrupt.
// (Such a failed open leaks its file descriptor; the caller then replaces
// the file.) The open does not read the other pages: damage there is
// found by the transaction that reads it (damage.go).
func openBolt(path string, opts *bolt.Options) (bdb *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			bdb, err = nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, r)
		}
	}()
	bdb, err = bolt.Open(path, 0o600, opts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, errBusy
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	return bdb, nil
}

// checkDBFileSize refuses a file shorter than its meta page says (a
// truncated file), before a read-write open would read past its end. A
// read-only open only maps the file and checks the meta pages.
func checkDBFileSize(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() == 0 {
		return nil // bbolt creates or initialises it
	}
	bdb, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return err
	}
	var size int64
	err = bdb.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	if size > fi.Size() {
		return fmt.Errorf("%w: %s: %d bytes, but its pages need %d (truncated)", ErrCorrupt, path, fi.Size(), size)
	}
	return nil
}

// dbBuckets are the buckets a rebuild empties (the file cache and the
// unusable packs stay).
var dbBuckets = [][]byte{bucketMeta, bucketBlobs, bucketPacks, bucketObjects, bucketCopies, bucketObjPacks, bucketPackObjs}

// resetTx empties every bucket and stamps the DB with its version and repo.
// The file cache stays, so the removal generation moves on (filecache.go).
func resetTx(tx *bolt.Tx, repoID blob.ID) error {
	gen := nextRemovalGen(tx)
	for _, name := range dbBuckets {
		if tx.Bucket(name) != nil {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		if _, err := tx.CreateBucket(name); err != nil {
			return err
		}
	}
	// The unusable packs stay (unusable.go): a rebuild must not make a
	// condemned or gone pack's places reusable until they are set again.
	if _, err := tx.CreateBucketIfNotExists(bucketUnusable); err != nil {
		return err
	}
	m := tx.Bucket(bucketMeta)
	if err := m.Put(keyVersion, binary.LittleEndian.AppendUint32(nil, dbVersion)); err != nil {
		return err
	}
	if err := m.Put(keyRemovals, binary.LittleEndian.AppendUint64(nil, gen)); err != nil {
		return err
	}
	return m.Put(keyRepo, repoID[:])
}

// Path is the file the DB lives in.
func (d *DB) Path() string { return d.path }

// Private reports whether this process uses a private file because another
// process holds the shared one.
func (d *DB) Private() bool { return d.private }

// Close closes the DB, removing it if it was private.
func (d *DB) Close() error {
	err := d.db.Close()
	if d.private {
		_ = os.Remove(d.path)
	}
	return err
}

// keySize and locSize are the sizes of a blobs bucket key and value.
const (
	keySize = 2 + blob.IDSize
	locSize = blob.IDSize + 1 + 4 + 4 + 4
)

func blobKey(t blob.Tier, typ blob.Type, id blob.ID) []byte {
	return appendBlobKey(make([]byte, 0, keySize), t, typ, id)
}

func appendBlobKey(k []byte, t blob.Tier, typ blob.Type, id blob.ID) []byte {
	k = append(k, byte(t), byte(typ))
	return append(k, id[:]...)
}

// appendLoc appends the blobs bucket value of entry e of pack packID.
func appendLoc(v []byte, packID blob.ID, e pack.Entry) []byte {
	v = append(v, packID[:]...)
	v = append(v, e.Flags)
	v = binary.LittleEndian.AppendUint32(v, e.Offset)
	v = binary.LittleEndian.AppendUint32(v, e.Length)
	return binary.LittleEndian.AppendUint32(v, e.PlainLen)
}

func decodeLoc(k, v []byte) (Location, error) {
	if len(k) != keySize || len(v) != locSize {
		return Location{}, fmt.Errorf("%w: entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
	}
	return Location{Pack: blob.ID(v[:32]), Entry: pack.Entry{Type: blob.Type(k[1]), ID: blob.ID(k[2:]),
		Flags: v[32], Offset: binary.LittleEndian.Uint32(v[33:]), Length: binary.LittleEndian.Uint32(v[37:]),
		PlainLen: binary.LittleEndian.Uint32(v[41:])}}, nil
}

// Lookup returns where the blob is stored, if the index knows it.
func (d *DB) Lookup(t blob.Tier, typ blob.Type, id blob.ID) (loc Location, ok bool, err error) {
	return d.lookup(t, typ, id, func(tx *bolt.Tx, k []byte) []byte { return tx.Bucket(bucketBlobs).Get(k) })
}

// lookup answers Lookup and LookupUsable: place picks the blob's place
// (nil: none) inside a read transaction. A key the filter rules out is a
// miss without one.
func (d *DB) lookup(t blob.Tier, typ blob.Type, id blob.ID, place func(tx *bolt.Tx, k []byte) []byte) (loc Location, ok bool, err error) {
	d.lookups.Add(1)
	k := blobKey(t, typ, id)
	if d.ruledOut(k) {
		return Location{}, false, nil
	}
	err = d.view(func(tx *bolt.Tx) error {
		v := place(tx, k)
		if v == nil {
			return nil
		}
		ok = true
		loc, err = decodeLoc(k, v)
		return err
	})
	if err == nil && !ok {
		d.noteMiss()
	}
	return loc, ok, err
}

// lookupNextBeforeSeek: LookupMany steps a cursor this many entries
// towards the next key before it seeks from the root instead.
const lookupNextBeforeSeek = 8

// LookupMany looks ids up in one read transaction and calls fn once for
// each, with its index in ids, its location and whether it was found. It
// goes through them in key order, stepping a cursor from one to the next,
// so fn sees them in no particular order. An error from fn stops the
// lookups and is returned.
func (d *DB) LookupMany(t blob.Tier, typ blob.Type, ids []blob.ID, fn func(i int, loc Location, ok bool) error) error {
	if len(ids) == 0 {
		return nil
	}
	d.lookups.Add(int64(len(ids)))
	order := make([]int32, len(ids))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(ids[a][:], ids[b][:]) })
	return d.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		want := blobKey(t, typ, ids[order[0]])
		k, v := c.Seek(want)
		for _, i := range order {
			copy(want[2:], ids[i][:])
			for n := 0; k != nil && bytes.Compare(k, want) < 0; n++ {
				if n == lookupNextBeforeSeek {
					k, v = c.Seek(want)
					break
				}
				k, v = c.Next()
			}
			var loc Location
			found := k != nil && bytes.Equal(k, want)
			if found {
				var err error
				if loc, err = decodeLoc(k, v); err != nil {
					return err
				}
			}
			if err := fn(int(i), loc, found); err != nil {
				return err
			}
			d.touched(tx, lookupUnits)
		}
		return nil
	})
}

// Count returns the number of blob entries and packs in the DB.
func (d *DB) Count() (blobs, packs int, err error) {
	err = d.view(func(tx *bolt.Tx) error {
		blobs = tx.Bucket(bucketBlobs).Stats().KeyN
		packs = tx.Bucket(bucketPacks).Stats().KeyN
		return nil
	})
	return blobs, packs, err
}

// ForEachPack calls fn with every pack the DB knows.
func (d *DB) ForEachPack(fn func(id blob.ID, t blob.Tier, size uint32) error) error {
	return d.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPacks).ForEach(func(k, v []byte) error {
			if len(k) != blob.IDSize || len(v) != packValueSize {
				return fmt.Errorf("%w: pack entry of %d/%d bytes", ErrCorrupt, len(k), len(v))
			}
			return fn(blob.ID(k), blob.Tier(v[0]), binary.LittleEndian.Uint32(v[1:]))
		})
	})
}

// ForEachBlob calls fn with every blob entry of tier t.
func (d *DB) ForEachBlob(t blob.Tier, fn func(Location) error) error {
	return d.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		for k, v := c.Seek([]byte{byte(t)}); k != nil && k[0] == byte(t); k, v = c.Next() {
			loc, err := decodeLoc(k, v)
			if err != nil {
				return err
			}
			if err := fn(loc); err != nil {
				return err
			}
			d.touched(tx, keyUnits)
		}
		return nil
	})
}

// initialMmapSize is the address space the DB file is mapped with at
// first. bbolt maps the file again whenever it outgrows its mapping
// (doubling it), which waits for every read transaction, so lookups
// stall, and copies every node the write transaction holds; with this,
// that happens only once the file passes 64 MiB (about 500,000 blobs).
// Pages past the file's end are never touched, so the mapping costs
// address space, not memory.
//
// allocSize is how far past what it needs bbolt extends the file when it
// grows it (with an fsync), once the mapping is larger than allocSize:
// bbolt's default, 16 MiB, would make even a small cache file 16 MiB
// long (sparse, but so `ls` shows it).
const (
	initialMmapSize = 64 << 20
	allocSize       = 4 << 20
)
