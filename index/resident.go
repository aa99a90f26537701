package index

import (
	"bytes"
	"os"
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// bbolt reads the DB file through a shared read-only mapping, and every
// page a transaction reads stays mapped, counted in the process's RSS,
// until the mapping goes. On a large index that is most of the file: a
// lookup of a random key reads a leaf and its branches somewhere in a file
// of gigabytes (2.6 GB at 10 million blobs), and on a page fault the
// kernel maps the cached pages around it too (fault-around: 64 KiB), so a
// capture's lookups, an apply's inserts or a scan would map hundreds of
// MiB that are never read again. So the DB lets go of the mapped pages
// (madvise MADV_DONTNEED: they stay in the page cache, and an access maps
// one back):
//
//   - in read transactions, once they have done residentDropEvery units
//     of work: a transaction counts txUnits, a key looked up at random
//     lookupUnits, a key of a scan in key order keyUnits;
//   - after every write transaction: bbolt's commit reads the old page of
//     every node the transaction wrote, so dropping inside it would not
//     help. Instead a transaction that inserts or deletes many keys stops
//     once the file's pages mapped in this process have grown by
//     applyResidentBudget (read from /proc/self/statm every
//     residentCheckEvery keys), and the rest goes into the next one.
//
// Dropping costs the next lookups a few page faults on the tree's upper
// levels, and a file of at most residentKeep stays mapped whole: the most
// it adds to RSS is its size, while dropping its pages every few lookups
// made a capture of an unchanged workspace or a restore spend up to half
// their CPU faulting the same pages back in.
const (
	residentKeep      = 64 << 20
	residentDropEvery = 1024
	txUnits           = 64 // a lookup: a few pages at random
	lookupUnits       = 64 // a key looked up at random
	keyUnits          = 1  // a key of a scan in key order: a fraction of a leaf

	residentCheckEvery = 32
)

// applyResidentBudget: see above (a variable so that tests can cut every
// transaction short).
var applyResidentBudget int64 = 32 << 20

// touched counts n units of work done in read transaction tx, and lets go
// of the mapped pages each time the count passes a multiple of
// residentDropEvery. tx must be open: it holds off a writer's remap, which
// would unmap the range (and free its address for any other mapping)
// between reading it and the madvise. (A scan inside a write transaction's
// function may call it too: bbolt remaps only while it commits.)
func (d *DB) touched(tx *bolt.Tx, n int) {
	after := d.touches.Add(int64(n))
	if after/residentDropEvery != (after-int64(n))/residentDropEvery {
		dropMapped(d.db, tx)
	}
}

// dropMapped lets go of the pages of the file mapped for tx (held open by
// the caller, so no remap moves the mapping meanwhile) when the file is
// larger than residentKeep.
func dropMapped(db *bolt.DB, tx *bolt.Tx) {
	if size := tx.Size(); size > residentKeep {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, db.Info().Data, uintptr(size), unix.MADV_DONTNEED)
	}
}

var statm struct {
	once sync.Once
	f    *os.File
}

// fileResident returns the bytes of files (and shared memory) mapped in
// this process's memory, the third field of /proc/self/statm, or -1 when
// it cannot be read.
func fileResident() int64 {
	statm.once.Do(func() { statm.f, _ = os.Open("/proc/self/statm") })
	if statm.f == nil {
		return -1
	}
	var buf [256]byte
	n, _ := statm.f.ReadAt(buf[:], 0)
	fields := bytes.Fields(buf[:n])
	if len(fields) < 3 {
		return -1
	}
	pages, err := strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}
