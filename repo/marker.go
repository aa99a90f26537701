package repo

import (
	"sync"

	"lifeboat/blob"
)

// Marker receives what a walk of a snapshot reaches: prune's mark phase,
// fed by snapshot.Reach. It is here, below both, so that the walk and the
// collector share one contract.
type Marker interface {
	// Seen is asked before a tree blob is read; true means it was walked
	// already, from this or another snapshot, and is skipped.
	Seen(t blob.Tier, id blob.ID) (bool, error)
	// Add marks one blob live. A tree is added once it was read and
	// decoded (so a missing tree is never marked, and every snapshot that
	// needs it is reported damaged); its entries follow.
	Add(t blob.Tier, typ blob.Type, id blob.ID) error
}

// LockedMarker is a Marker safe for concurrent use: it serialises the
// calls to M, which need not be.
type LockedMarker struct {
	mu sync.Mutex
	M  Marker
}

func (l *LockedMarker) Seen(t blob.Tier, id blob.ID) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.M.Seen(t, id)
}

func (l *LockedMarker) Add(t blob.Tier, typ blob.Type, id blob.ID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.M.Add(t, typ, id)
}
