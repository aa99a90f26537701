package index

import bolt "go.etcd.io/bbolt"

// Hooks for the external tests. The Set functions change package
// variables every DB reads: a test that calls one must not run in
// parallel.

const FilterAfterMisses = filterAfterMisses

// FilterBuilt reports whether d has built its blob filter.
func FilterBuilt(d *DB) bool { return d.filter.Load() != nil }

// SetFilterMinRoom sets the room of a filter built over an empty DB and
// returns a function that restores it.
func SetFilterMinRoom(n int64) func() {
	old := filterMinRoom
	filterMinRoom = n
	return func() { filterMinRoom = old }
}

// FilterRoom is the number of keys d's filter was sized for (0: none).
func FilterRoom(d *DB) int64 {
	if f := d.filter.Load(); f != nil {
		return f.room
	}
	return 0
}

// SetSyncGroupEntries sets how many entries Sync applies together and
// returns a function that restores it.
func SetSyncGroupEntries(n int) func() {
	old := syncGroupEntries
	syncGroupEntries = n
	return func() { syncGroupEntries = old }
}

const ApplyBatch = applyBatch

// ApplyAllStopAfter is ApplyAll ended after n transactions, as a crash
// would.
func ApplyAllStopAfter(d *DB, objs []Named, n int) error { return d.applyAll(objs, n, nil) }

// SetApplyWaits sets the function ApplyAll calls when it must wait for a
// Sync, and returns a function that clears it.
func SetApplyWaits(fn func()) func() {
	testApplyWaits = fn
	return func() { testApplyWaits = nil }
}

// KeyOrder and KeySize expose applyAll's sort of blob keys.
var KeyOrder = keyOrder

const KeySize = keySize

// SetFilterEntriesPerMiss sets how many entries of the index ask for one
// more miss before the filter is built, and returns a function that
// restores it.
func SetFilterEntriesPerMiss(n int64) func() {
	old := filterEntriesPerMiss
	filterEntriesPerMiss = n
	return func() { filterEntriesPerMiss = old }
}

// CommittedTx is the id of d's last committed write transaction: it moves
// on with every commit.
func CommittedTx(d *DB) int {
	var id int
	_ = d.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	return id
}
