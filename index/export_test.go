package index

// Hooks for the external tests.

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
