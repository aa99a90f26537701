package prune

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"

	"lifeboat/blob"
)

// treeSet remembers which trees the mark phase has walked, so a directory
// shared by many snapshots is read once. It lives in a temporary bbolt file
// (no fsync: it is thrown away) with a small in-memory buffer of recent
// additions, so memory does not grow with the number of trees.
type treeSet struct {
	db      *bolt.DB
	pending map[key]struct{}
}

var bucketTrees = []byte("trees")

const treeBatch = 4096

// treeSetFile is the tree set's file in the scratch directory.
const treeSetFile = "trees.db"

func newTreeSet(dir string) (*treeSet, error) {
	db, err := bolt.Open(filepath.Join(dir, treeSetFile), 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("temporary tree set: %w", err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucketTrees); return err }); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &treeSet{db: db, pending: map[key]struct{}{}}, nil
}

// Has reports whether k was inserted.
func (s *treeSet) Has(k key) (bool, error) {
	if _, ok := s.pending[k]; ok {
		return true, nil
	}
	var seen bool
	err := s.db.View(func(tx *bolt.Tx) error { seen = tx.Bucket(bucketTrees).Get(k[:]) != nil; return nil })
	return seen, err
}

// Insert records k.
func (s *treeSet) Insert(k key) error {
	s.pending[k] = struct{}{}
	if len(s.pending) >= treeBatch {
		return s.commit()
	}
	return nil
}

func (s *treeSet) commit() error {
	keys := make([]key, 0, len(s.pending))
	for k := range s.pending {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return bytes.Compare(a[:], b[:]) })
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTrees)
		for i := range keys {
			if err := b.Put(keys[i][:], nil); err != nil {
				return err
			}
		}
		return nil
	})
	clear(s.pending)
	return err
}

func (s *treeSet) Close() error { return s.db.Close() }

// marker is what a Source fills in: every blob a snapshot reaches goes to
// the live set, and trees are walked once.
type marker struct {
	live  *liveSet
	trees *treeSet
}

// Seen reports whether tree id of tier t was walked already.
func (m *marker) Seen(t blob.Tier, id blob.ID) (bool, error) {
	return m.trees.Has(makeKey(t, blob.Tree, id))
}

// Add marks a blob live; a tree is also recorded as walked.
func (m *marker) Add(t blob.Tier, typ blob.Type, id blob.ID) error {
	k := makeKey(t, typ, id)
	if typ == blob.Tree {
		if err := m.trees.Insert(k); err != nil {
			return err
		}
	}
	return m.live.Add(k)
}
