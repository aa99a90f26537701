package index

import (
	"fmt"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// The DB stores bbolt's free list, so an open reads only the meta pages,
// the free list and the few pages openDBFile checks: its memory does not
// grow with the index. A damaged page elsewhere is found by the first
// transaction that reads it, where bbolt panics (a page that does not name
// itself, a bad page type, an element past the page's end) or the mapping
// faults (the file shrank under it). view and update turn both into
// ErrCorrupt and mark the DB damaged: its file is removed at once, so the
// next OpenDB of any process starts an empty one, and Sync fails with
// ErrCorrupt, on which the repository reopens and rebuilds the cache
// (repo.SyncIndex). This process keeps its open file until Close.
//
// A panic of the transaction's own function (a decoder of the DB's bytes)
// is taken for damage too: the cache can always be rebuilt.

// view is d.db.View with damage turned into ErrCorrupt; the transaction
// counts in the work after which the mapped pages go (resident.go).
func (d *DB) view(fn func(tx *bolt.Tx) error) (err error) {
	defer d.recoverDamage(&err, debug.SetPanicOnFault(true))
	return d.db.View(func(tx *bolt.Tx) error {
		defer d.touched(tx, txUnits)
		return fn(tx)
	})
}

// update is d.db.Update with damage turned into ErrCorrupt (bbolt rolls
// the transaction back when fn or its commit panics); the pages it read go
// after it (resident.go).
func (d *DB) update(fn func(tx *bolt.Tx) error) (err error) {
	defer d.recoverDamage(&err, debug.SetPanicOnFault(true))
	err = d.db.Update(fn)
	d.dropResident() // the commit read the old page of every node it wrote
	return err
}

// recoverDamage, deferred by view and update, puts back the goroutine's
// panic-on-fault setting (wasFault), turns a panic into ErrCorrupt in
// *err and marks the DB damaged.
func (d *DB) recoverDamage(err *error, wasFault bool) {
	debug.SetPanicOnFault(wasFault)
	r := recover()
	if r == nil {
		return
	}
	*err = fmt.Errorf("%w: %s: %v", ErrCorrupt, d.path, r)
	d.markDamaged()
}

// markDamaged records that the file is damaged and removes it.
func (d *DB) markDamaged() {
	d.damaged.Store(true)
	d.removeOnce.Do(func() { _ = os.Remove(d.path) })
}
