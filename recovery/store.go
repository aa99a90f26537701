package recovery

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// boltTx keeps bbolt out of the signatures of other files.
type boltTx = bolt.Tx

// StoreSchema is the version of the state store's layout.
const StoreSchema = 1

// StoreFile is the state store's file name inside the state directory.
const StoreFile = "state.db"

var (
	// ErrUnknownWorkspace: no workspace with that id in the state store.
	ErrUnknownWorkspace = errors.New("unknown workspace")
	// ErrWorkspaceExists: a workspace with that id is already registered.
	ErrWorkspaceExists = errors.New("workspace already exists")
	// ErrStoreBusy: another process has the state store open.
	ErrStoreBusy = errors.New("state store in use by another lifeboat process")
	// ErrStoreNewer: the state store was written by a newer lifeboat.
	ErrStoreNewer = errors.New("state store written by a newer lifeboat")
	// ErrBadWorkspaceID: a workspace id that is not allowed.
	ErrBadWorkspaceID = errors.New("bad workspace id")
)

var (
	bucketMeta        = []byte("meta")
	bucketWorkspaces  = []byte("workspaces")
	bucketCheckpoints = []byte("checkpoints") // one nested bucket per workspace
	bucketPending     = []byte("pending")
	bucketOps         = []byte("operations")       // recovery operations by id
	bucketOpKeys      = []byte("operation-keys")   // approval idempotency key -> operation id
	bucketHolds       = []byte("repair-holds")     // repair holds by id
	bucketRestarts    = []byte("process-restarts") // restart idempotency key -> ProcessRestart
	keySchema         = []byte("schema")
	keySalt           = []byte("salt")
	keyID             = []byte("id")
)

// Store is the lifecycle's state: workspaces, their last good and native
// checkpoints, recovery records and pending work, in one bbolt file that
// one process holds open at a time. Every change is one transaction.
type Store struct {
	db   *bolt.DB
	path string
	salt []byte
	id   string
}

// OpenStore opens (or creates) the state store in dir.
func OpenStore(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, StoreFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s (when `lifeboat serve` runs on it, go through the server: pass --server URL and --token-file FILE, or --config FILE; else wait for the other process to finish)", ErrStoreBusy, path)
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keySchema); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("state store %s: schema record is damaged", path)
			}
			if got := binary.BigEndian.Uint64(v); got > StoreSchema {
				return fmt.Errorf("%w: %s has schema %d, this lifeboat reads %d; upgrade lifeboat", ErrStoreNewer, path, got, StoreSchema)
			}
		} else if err := meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, StoreSchema)); err != nil {
			return err
		}
		if s.salt = meta.Get(keySalt); s.salt == nil {
			s.salt = make([]byte, 32)
			if _, err := rand.Read(s.salt); err != nil {
				return err
			}
			if err := meta.Put(keySalt, s.salt); err != nil {
				return err
			}
		}
		s.salt = append([]byte(nil), s.salt...)
		if v := meta.Get(keyID); v != nil {
			s.id = string(v)
		} else {
			s.id = "store-" + randomHex(12)
			if err := meta.Put(keyID, []byte(s.id)); err != nil {
				return err
			}
		}
		for _, b := range [][]byte{bucketWorkspaces, bucketCheckpoints, bucketPending, bucketOps, bucketOpKeys, bucketHolds, bucketRestarts} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// ID names this state store (random, made when it was created): the
// owner of the holds its lifecycle writes in the repository.
func (s *Store) ID() string { return s.id }

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

var wsIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidWorkspaceID checks a workspace id: 1 to 128 letters, digits, '.',
// '_' or '-', starting with a letter or digit.
func ValidWorkspaceID(id string) error {
	if !wsIDRe.MatchString(id) {
		return fmt.Errorf("%w %q: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadWorkspaceID, id)
	}
	return nil
}

// AddWorkspace registers a new workspace.
func (s *Store) AddWorkspace(w Workspace) error {
	if err := ValidWorkspaceID(w.ID); err != nil {
		return err
	}
	if w.Provider == "" || w.Instance == "" {
		return fmt.Errorf("workspace %s: a provider and an instance id are required", w.ID)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketWorkspaces).Get([]byte(w.ID)) != nil {
			return fmt.Errorf("%w: %s", ErrWorkspaceExists, w.ID)
		}
		return putWS(tx, &w)
	})
}

// Workspace returns one workspace.
func (s *Store) Workspace(id string) (Workspace, error) {
	var w Workspace
	err := s.db.View(func(tx *bolt.Tx) error {
		got, err := getWS(tx, id)
		if err == nil {
			w = *got
		}
		return err
	})
	return w, err
}

// Workspaces returns every workspace, by id.
func (s *Store) Workspaces() ([]Workspace, error) {
	var out []Workspace
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWorkspaces).ForEach(func(k, v []byte) error {
			var w Workspace
			if err := json.Unmarshal(v, &w); err != nil {
				return fmt.Errorf("state store: workspace %s does not decode: %w", k, err)
			}
			out = append(out, w)
			return nil
		})
	})
	return out, err
}

// update changes one workspace in one transaction; fn's error aborts it.
func (s *Store) update(id string, fn func(tx *boltTx, w *Workspace) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		w, err := getWS(tx, id)
		if err != nil {
			return err
		}
		if err := fn(tx, w); err != nil {
			return err
		}
		return putWS(tx, w)
	})
}

func getWS(tx *bolt.Tx, id string) (*Workspace, error) {
	v := tx.Bucket(bucketWorkspaces).Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("%w %q (add it with `lifeboat workspace add`)", ErrUnknownWorkspace, id)
	}
	var w Workspace
	if err := json.Unmarshal(v, &w); err != nil {
		return nil, fmt.Errorf("state store: workspace %s does not decode: %w", id, err)
	}
	return &w, nil
}

func putWS(tx *bolt.Tx, w *Workspace) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketWorkspaces).Put([]byte(w.ID), b)
}

// putCheckpoint adds cp to the workspace's checkpoint history, dropping
// the oldest beyond maxCheckpoints. Keys sort by time.
func putCheckpoint(tx *bolt.Tx, ws string, cp *Checkpoint) error {
	b, err := tx.Bucket(bucketCheckpoints).CreateBucketIfNotExists([]byte(ws))
	if err != nil {
		return err
	}
	v, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	key := binary.BigEndian.AppendUint64(nil, uint64(cp.Time.UnixNano()))
	key = append(key, cp.Snapshot...)
	if err := b.Put(key, v); err != nil {
		return err
	}
	for n := b.Stats().KeyN - maxCheckpoints; n > 0; n-- {
		k, _ := b.Cursor().First()
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// findCheckpoint returns the checkpoint of ws whose snapshot is snap from
// the history, or nil.
func findCheckpoint(tx *bolt.Tx, ws, snap string) *Checkpoint {
	b := tx.Bucket(bucketCheckpoints).Bucket([]byte(ws))
	if b == nil {
		return nil
	}
	var found *Checkpoint
	_ = b.ForEach(func(_, v []byte) error {
		var cp Checkpoint
		if json.Unmarshal(v, &cp) == nil && cp.Snapshot == snap {
			found = &cp
		}
		return nil
	})
	return found
}

// Checkpoints returns a workspace's checkpoint history, oldest first.
func (s *Store) Checkpoints(ws string) ([]Checkpoint, error) {
	var out []Checkpoint
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints).Bucket([]byte(ws))
		if b == nil {
			return nil
		}
		return b.ForEach(func(_, v []byte) error {
			var cp Checkpoint
			if err := json.Unmarshal(v, &cp); err != nil {
				return fmt.Errorf("state store: a checkpoint of %s does not decode: %w", ws, err)
			}
			out = append(out, cp)
			return nil
		})
	})
	return out, err
}

func pendingKey(ws string, cp string) []byte { return []byte(ws + "\x00" + cp) }

func putPending(tx *bolt.Tx, p *PendingDelete) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketPending).Put(pendingKey(p.Workspace, string(p.Checkpoint)), b)
}

// Pending returns the pending native checkpoint deletes of workspace ws
// (all workspaces when ws is empty).
func (s *Store) Pending(ws string) ([]PendingDelete, error) {
	var out []PendingDelete
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).ForEach(func(k, v []byte) error {
			var p PendingDelete
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("state store: pending record %q does not decode: %w", k, err)
			}
			if ws == "" || p.Workspace == ws {
				out = append(out, p)
			}
			return nil
		})
	})
	return out, err
}

func (s *Store) putPending(p PendingDelete) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putPending(tx, &p) })
}

func (s *Store) removePending(p PendingDelete) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).Delete(pendingKey(p.Workspace, string(p.Checkpoint)))
	})
}

// removeWorkspace deletes a workspace's record, checkpoint history and
// pending work in one transaction, if it is still at generation gen.
func (s *Store) removeWorkspace(id string, gen uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		w, err := getWS(tx, id)
		if err != nil {
			return err
		}
		if w.Generation != gen {
			return fmt.Errorf("%w: workspace %s moved to generation %d while it was being removed; try again", ErrStaleGeneration, id, w.Generation)
		}
		if err := tx.Bucket(bucketWorkspaces).Delete([]byte(id)); err != nil {
			return err
		}
		if tx.Bucket(bucketCheckpoints).Bucket([]byte(id)) != nil {
			if err := tx.Bucket(bucketCheckpoints).DeleteBucket([]byte(id)); err != nil {
				return err
			}
		}
		pending := tx.Bucket(bucketPending)
		prefix := pendingKey(id, "")
		c := pending.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := pending.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}
