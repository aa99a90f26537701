package index

import (
	"encoding/binary"
	"math"
	"math/bits"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// A capture of new data looks every chunk up before storing it, and nearly
// all of them are absent. In bbolt each such lookup is a read transaction
// and a B+tree search: about 5% of a first capture's CPU, with their
// allocations. Once filterAfterMisses lookups have missed, and at least one
// per filterEntriesPerMiss entries the index holds, the DB builds a Bloom
// filter of its blob keys, and a lookup the filter rules out skips bbolt.
// The build reads every leaf of the blobs bucket, about one per 40
// entries, each a page fault at a random place in the file, as a missing
// lookup's leaf is: waiting for one miss per 32 entries keeps the build's
// reads below those of the lookups it follows. (At 10 million blobs the
// scan takes tens of seconds; building it after 4,096 misses made a
// capture of 6,000 new small files take 30 s instead of 1.)
//
// The filter holds every blob key in the DB, and may hold more (a false
// positive costs a bbolt lookup, as before). apply adds a batch's keys to
// it before the batch commits, and a build scans the DB; both hold
// filterMu, so no batch commits between a build's scan and the filter's
// installation without its keys. Deletions leave their keys in. A filter
// that has taken more keys than it was sized for is dropped, and later
// misses build a larger one.
const filterAfterMisses = 4096

// filterEntriesPerMiss: see above (a variable so that tests can build a
// filter over a small DB late).
var filterEntriesPerMiss int64 = 32

// Sizing: 16 bits and 8 probes per key (about 0.05% false positives when
// full), room for twice the keys at the build plus filterMinRoom: 128 KiB
// for an empty DB, 1 MiB at 100,000 blobs, 8 MiB at 1.4 million (about
// 1 TiB of data).
const (
	filterBitsPerKey = 16
	filterProbes     = 8
)

// filterMinRoom is the room of a filter built over an empty DB (a variable
// so that tests can fill one).
var filterMinRoom int64 = 65536

// blobFilter is a Bloom filter over blob keys (tier, type, id), safe for
// concurrent use.
type blobFilter struct {
	words []atomic.Uint64
	mask  uint64 // bits - 1: the size is a power of two
	room  int64  // keys it was sized for
	added atomic.Int64
}

func newBlobFilter(keys int64) *blobFilter {
	room := 2*keys + filterMinRoom
	n := uint64(room * filterBitsPerKey)
	n = 1 << bits.Len64(n-1)
	return &blobFilter{words: make([]atomic.Uint64, max(n/64, 1)), mask: n - 1, room: room}
}

// filterHashes returns the double-hashing start and step for a blob key:
// ids are keyed BLAKE3 digests, uniform already; tier and type are mixed
// in so the same id of another type probes elsewhere.
func filterHashes(key []byte) (h1, h2 uint64) {
	id := key[2:]
	h1 = binary.LittleEndian.Uint64(id) ^ (uint64(key[0])<<8|uint64(key[1])+1)*0x9e3779b97f4a7c15
	h2 = binary.LittleEndian.Uint64(id[8:]) | 1
	return h1, h2
}

func (f *blobFilter) add(key []byte) {
	h1, h2 := filterHashes(key)
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & f.mask
		f.words[b/64].Or(1 << (b % 64))
	}
	f.added.Add(1)
}

func (f *blobFilter) mayContain(key []byte) bool {
	h1, h2 := filterHashes(key)
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & f.mask
		if f.words[b/64].Load()&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// filterUpdate runs fn, the write transaction that stores n blob keys,
// with the keys in the filter first (if there is one), holding d.filterMu
// until it has committed; the mutex is released even if fn panics (bbolt
// panics on some damaged pages, and rolls the transaction back). A filter
// over its room is dropped.
func (d *DB) filterUpdate(n int, key func(i int) []byte, fn func(tx *bolt.Tx) error) error {
	d.filterMu.Lock()
	defer d.filterMu.Unlock()
	if f := d.filter.Load(); f != nil {
		for i := range n {
			f.add(key(i))
		}
		if f.added.Load() > f.room {
			d.filter.Store(nil)
			d.misses.Store(0)
			d.filterAt.Store(filterAfterMisses)
		}
	}
	return d.update(fn)
}

// ruledOut reports whether blob key k is certainly not in the DB.
func (d *DB) ruledOut(k []byte) bool {
	f := d.filter.Load()
	return f != nil && !f.mayContain(k)
}

// noteMiss counts a lookup that found nothing, and builds the filter when
// enough have (in the caller that counted past d.filterAt first). Over a
// large index it only moves d.filterAt on, to one miss per
// filterEntriesPerMiss entries.
func (d *DB) noteMiss() {
	n := d.misses.Add(1)
	at := d.filterAt.Load()
	if n < at || !d.filterAt.CompareAndSwap(at, math.MaxInt64) {
		return
	}
	d.filterMu.Lock()
	defer d.filterMu.Unlock()
	if d.filter.Load() != nil {
		return
	}
	err := d.view(func(tx *bolt.Tx) error {
		entries := entriesEstimate(tx)
		if need := entries / filterEntriesPerMiss; need > n {
			d.filterAt.Store(need)
			return nil
		}
		f := newBlobFilter(entries)
		c := tx.Bucket(bucketBlobs).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) == keySize {
				f.add(k)
			}
			d.touched(tx, keyUnits) // the scan reads every page of the blobs: let them go as it goes
		}
		d.filter.Store(f)
		return nil
	})
	if err != nil {
		d.filter.Store(nil)
	}
}

// entriesEstimate is the number of entries the index objects list for
// the packs the DB knows (at least the number of blobs: a blob in two
// packs counts twice). It reads the packs bucket alone; counting the blobs
// bucket's keys would read all of it.
func entriesEstimate(tx *bolt.Tx) int64 {
	var n int64
	_ = tx.Bucket(bucketPacks).ForEach(func(_, v []byte) error {
		if len(v) == packValueSize {
			n += int64(binary.LittleEndian.Uint32(v[5:]))
		}
		return nil
	})
	return n
}
