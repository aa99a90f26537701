package statedb

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// BoltSchema is the version of the embedded store's layout.
const BoltSchema = 1

// BoltFile is the embedded store's file name inside the state directory.
const BoltFile = "state.db"

var (
	bucketMeta        = []byte("meta")
	bucketCheckpoints = []byte("checkpoints") // one nested bucket per workspace
	bucketOpKeys      = []byte("operation-keys")
	kindBuckets       = [...][]byte{
		Workspaces: []byte("workspaces"),
		Operations: []byte("operations"),
		Holds:      []byte("repair-holds"),
		Restarts:   []byte("process-restarts"),
		Pending:    []byte("pending"),
	}
	keySchema = []byte("schema")
	keySalt   = []byte("salt")
	keyID     = []byte("id")
)

// Bolt is the embedded state store: one bbolt file that one process holds
// open at a time.
type Bolt struct {
	db   *bolt.DB
	path string
	salt []byte
	id   string
}

// OpenBolt opens (or creates) the embedded store in dir. A file another
// process holds fails with ErrBusy after a short wait; one written by a
// newer lifeboat with ErrNewer. busyHint is added to ErrBusy's message.
func OpenBolt(dir, busyHint string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s%s", ErrBusy, path, busyHint)
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", path, err)
	}
	s := &Bolt{db: db, path: path}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keySchema); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("state store %s: schema record is damaged", path)
			}
			if got := binary.BigEndian.Uint64(v); got > BoltSchema {
				return fmt.Errorf("%w: %s has schema %d, this lifeboat reads %d; upgrade lifeboat", ErrNewer, path, got, BoltSchema)
			}
		} else if err := meta.Put(keySchema, binary.BigEndian.AppendUint64(nil, BoltSchema)); err != nil {
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
			s.id = NewStoreID()
			if err := meta.Put(keyID, []byte(s.id)); err != nil {
				return err
			}
		}
		for _, b := range append(kindBuckets[:], bucketCheckpoints, bucketOpKeys) {
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

// NewStoreID makes a new store id.
func NewStoreID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "store-" + hex.EncodeToString(b[:])
}

func (s *Bolt) ID() string       { return s.id }
func (s *Bolt) Salt() []byte     { return s.salt }
func (s *Bolt) Where() string    { return s.path }
func (s *Bolt) Shared() bool     { return false }
func (s *Bolt) Close() error     { return s.db.Close() }
func (s *Bolt) Path() string     { return s.path }
func (s *Bolt) SetNoSync(b bool) { s.db.NoSync = b }

// SetSchema overwrites the recorded schema version (tests: a store from a
// newer lifeboat).
func (s *Bolt) SetSchema(v uint64) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, binary.BigEndian.AppendUint64(nil, v))
	})
}

func (s *Bolt) View(_ context.Context, fn func(Tx) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (s *Bolt) Update(_ context.Context, fn func(Tx) error) error {
	return s.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

// Lock is always granted: one process holds the file, and it locks
// in-process.
func (s *Bolt) Lock(context.Context, string, bool) (func(), <-chan struct{}, error) {
	return func() {}, nil, nil
}

// ClaimLease is always granted (epoch 1): one process holds the file.
func (s *Bolt) ClaimLease(context.Context, string, string, time.Time, time.Duration) (uint64, error) {
	return 1, nil
}
func (s *Bolt) RenewLease(context.Context, string, string, uint64, time.Time, time.Duration) error {
	return nil
}
func (s *Bolt) ReleaseLease(context.Context, string, string, uint64) error { return nil }
func (s *Bolt) Publish(context.Context, string, []byte) error              { return nil }
func (s *Bolt) Listen(ctx context.Context, _ string, _ func([]byte)) (<-chan struct{}, error) {
	return ctx.Done(), nil
}

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Get(k Kind, key string) ([]byte, error) {
	return t.tx.Bucket(kindBuckets[k]).Get([]byte(key)), nil
}

func (t boltTx) Put(k Kind, r Record) error {
	if k == Operations && r.IdemKey != "" {
		if err := t.tx.Bucket(bucketOpKeys).Put([]byte(r.IdemKey), []byte(r.Key)); err != nil {
			return err
		}
	}
	return t.tx.Bucket(kindBuckets[k]).Put([]byte(r.Key), r.Body)
}

func (t boltTx) Delete(k Kind, key string) error {
	return t.tx.Bucket(kindBuckets[k]).Delete([]byte(key))
}

func (t boltTx) List(k Kind, fn func(key string, body []byte) error) error {
	return t.tx.Bucket(kindBuckets[k]).ForEach(func(k, v []byte) error { return fn(string(k), v) })
}

func (t boltTx) OperationByKey(idem string) (string, error) {
	return string(t.tx.Bucket(bucketOpKeys).Get([]byte(idem))), nil
}

func (t boltTx) PutCheckpoint(ws string, unixNano int64, snapshot string, body []byte, keep int) error {
	b, err := t.tx.Bucket(bucketCheckpoints).CreateBucketIfNotExists([]byte(ws))
	if err != nil {
		return err
	}
	key := binary.BigEndian.AppendUint64(nil, uint64(unixNano))
	key = append(key, snapshot...)
	if err := b.Put(key, body); err != nil {
		return err
	}
	for n := b.Stats().KeyN - keep; n > 0; n-- {
		k, _ := b.Cursor().First()
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (t boltTx) Checkpoints(ws string, fn func(body []byte) error) error {
	b := t.tx.Bucket(bucketCheckpoints).Bucket([]byte(ws))
	if b == nil {
		return nil
	}
	return b.ForEach(func(_, v []byte) error { return fn(v) })
}

func (t boltTx) DeleteWorkspace(id string) error {
	if err := t.tx.Bucket(kindBuckets[Workspaces]).Delete([]byte(id)); err != nil {
		return err
	}
	if t.tx.Bucket(bucketCheckpoints).Bucket([]byte(id)) != nil {
		if err := t.tx.Bucket(bucketCheckpoints).DeleteBucket([]byte(id)); err != nil {
			return err
		}
	}
	pending := t.tx.Bucket(kindBuckets[Pending])
	prefix := []byte(PendingKey(id, ""))
	c := pending.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := pending.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (t boltTx) CheckLease(string, string, uint64) error { return nil }
