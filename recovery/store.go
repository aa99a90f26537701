package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"lifeboat/recovery/statedb"
)

// stateTx is a transaction of the state store's storage.
type stateTx = statedb.Tx

// StoreSchema is the version of the embedded state store's layout.
const StoreSchema = statedb.BoltSchema

// StoreFile is the embedded state store's file name inside the state directory.
const StoreFile = statedb.BoltFile

var (
	// ErrUnknownWorkspace: no workspace with that id in the state store.
	ErrUnknownWorkspace = errors.New("unknown workspace")
	// ErrWorkspaceExists: a workspace with that id is already registered.
	ErrWorkspaceExists = errors.New("workspace already exists")
	// ErrStoreBusy: another process has the state store open.
	ErrStoreBusy = statedb.ErrBusy
	// ErrStoreNewer: the state store was written by a newer lifeboat.
	ErrStoreNewer = statedb.ErrNewer
	// ErrBadWorkspaceID: a workspace id that is not allowed.
	ErrBadWorkspaceID = errors.New("bad workspace id")
	// ErrStateUnavailable: the shared state database cannot be reached.
	ErrStateUnavailable = statedb.ErrUnavailable
)

// Store is the lifecycle's state: workspaces, their last good and native
// checkpoints, recovery records and pending work. Every change is one
// transaction. Its storage is one bbolt file that one process holds
// (OpenStore), or a PostgreSQL database many servers share (OpenStoreAt).
type Store struct {
	db    statedb.DB
	owner string // this process among the store's users: leases and events
}

// storeBusyHint is what ErrStoreBusy tells the user to do.
const storeBusyHint = " (when `lifeboat serve` runs on it, go through the server: pass --server URL and --token-file FILE, or --config FILE; else wait for the other process to finish)"

// OpenStore opens (or creates) the embedded state store in dir.
func OpenStore(dir string) (*Store, error) {
	db, err := statedb.OpenBolt(dir, storeBusyHint)
	if err != nil {
		return nil, err
	}
	return NewStore(db), nil
}

// NewStore makes a Store over storage db; Close closes db.
func NewStore(db statedb.DB) *Store {
	host, _ := os.Hostname()
	return &Store{db: db, owner: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), randomHex(4))}
}

// ID names this state store (random, made when it was created): the
// owner of the holds its lifecycle writes in the repository.
func (s *Store) ID() string { return s.db.ID() }

// Path names the store's storage: its file, or its database URL without
// the password.
func (s *Store) Path() string { return s.db.Where() }

// Shared reports whether other lifeboat processes use the store at once
// (a PostgreSQL state store).
func (s *Store) Shared() bool { return s.db.Shared() }

// Owner names this process among the store's users.
func (s *Store) Owner() string { return s.owner }

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// txTimeout bounds one transaction on a shared database.
const txTimeout = 30 * time.Second

func (s *Store) view(fn func(tx stateTx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	return s.db.View(ctx, fn)
}

func (s *Store) updateTx(fn func(tx stateTx) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	return s.db.Update(ctx, fn)
}

// ValidWorkspaceID checks a workspace id: 1 to 128 letters, digits, '.',
// '_' or '-', starting with a letter or digit.
func ValidWorkspaceID(id string) error {
	if !validWorkspaceID(id) {
		return fmt.Errorf("%w %q: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", ErrBadWorkspaceID, id)
	}
	return nil
}

// validWorkspaceID is ValidWorkspaceID's test, in a loop rather than a
// regular expression: `[A-Za-z0-9._-]{0,127}` compiles to 127 nested
// repeats, which every lifeboat command paid for at start (about 1 ms).
func validWorkspaceID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// AddWorkspace registers a new workspace.
func (s *Store) AddWorkspace(w Workspace) error {
	if err := ValidWorkspaceID(w.ID); err != nil {
		return err
	}
	if w.Provider == "" || w.Instance == "" {
		return fmt.Errorf("workspace %s: a provider and an instance id are required", w.ID)
	}
	return s.updateTx(func(tx stateTx) error {
		if v, err := tx.Get(statedb.Workspaces, w.ID); err != nil || v != nil {
			return cmpErr(err, errWorkspaceExists(w.ID))
		}
		return putWS(tx, &w)
	})
}

// CheckNewID returns ErrWorkspaceExists when workspace id is registered:
// an add checks the id before it asks a provider about the instance
// (AddWorkspace checks it again in its transaction).
func (s *Store) CheckNewID(id string) error {
	_, err := s.Workspace(id)
	switch {
	case err == nil:
		return errWorkspaceExists(id)
	case errors.Is(err, ErrUnknownWorkspace):
		return nil
	}
	return err
}

func errWorkspaceExists(id string) error {
	return fmt.Errorf("%w: %s (see it with `lifeboat workspace show %s`)", ErrWorkspaceExists, id, id)
}

// Workspace returns one workspace.
func (s *Store) Workspace(id string) (Workspace, error) {
	var w Workspace
	err := s.view(func(tx stateTx) error {
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
	return listJSON[Workspace](s, statedb.Workspaces, "workspace %s", nil)
}

// update changes one workspace in one transaction; fn's error aborts it.
// On a shared store fn may run again after a conflict (statedb.DB.Update).
func (s *Store) update(id string, fn func(tx stateTx, w *Workspace) error) error {
	return s.updateTx(func(tx stateTx) error {
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

func getWS(tx stateTx, id string) (*Workspace, error) {
	v, err := tx.Get(statedb.Workspaces, id)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%w %q (add it with `lifeboat workspace add`)", ErrUnknownWorkspace, id)
	}
	var w Workspace
	if err := decodeRecord(v, &w); err != nil {
		return nil, fmt.Errorf("state store: workspace %s does not decode: %w", id, err)
	}
	return &w, nil
}

func putWS(tx stateTx, w *Workspace) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return tx.Put(statedb.Workspaces, statedb.Record{Key: w.ID, Body: b})
}

// putCheckpoint adds cp to the workspace's checkpoint history, dropping
// the oldest beyond maxCheckpoints. The history is ordered by time.
func putCheckpoint(tx stateTx, ws string, cp *Checkpoint) error {
	v, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	return tx.PutCheckpoint(ws, cp.Time.UnixNano(), cp.Snapshot, v, maxCheckpoints)
}

// findCheckpoint returns the checkpoint of ws whose snapshot is snap from
// the history, or nil.
func findCheckpoint(tx stateTx, ws, snap string) (*Checkpoint, error) {
	var found *Checkpoint
	err := tx.Checkpoints(ws, func(v []byte) error {
		var cp Checkpoint
		if decodeRecord(v, &cp) == nil && cp.Snapshot == snap {
			found = &cp
		}
		return nil
	})
	return found, err
}

// Checkpoints returns a workspace's checkpoint history, oldest first.
func (s *Store) Checkpoints(ws string) ([]Checkpoint, error) {
	var out []Checkpoint
	err := s.view(func(tx stateTx) error {
		out = nil
		return tx.Checkpoints(ws, func(v []byte) error {
			var cp Checkpoint
			if err := decodeRecord(v, &cp); err != nil {
				return fmt.Errorf("state store: a checkpoint of %s does not decode: %w", ws, err)
			}
			out = append(out, cp)
			return nil
		})
	})
	return out, err
}

func putPending(tx stateTx, p *PendingDelete) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return tx.Put(statedb.Pending, statedb.Record{Key: statedb.PendingKey(p.Workspace, string(p.Checkpoint)), Body: b, Workspace: p.Workspace})
}

// Pending returns the pending native checkpoint deletes of workspace ws
// (all workspaces when ws is empty).
func (s *Store) Pending(ws string) ([]PendingDelete, error) {
	return listJSON(s, statedb.Pending, "pending record %q", func(p *PendingDelete) bool { return ws == "" || p.Workspace == ws })
}

func (s *Store) putPending(p PendingDelete) error {
	return s.updateTx(func(tx stateTx) error { return putPending(tx, &p) })
}

func (s *Store) removePending(p PendingDelete) error {
	return s.updateTx(func(tx stateTx) error {
		return tx.Delete(statedb.Pending, statedb.PendingKey(p.Workspace, string(p.Checkpoint)))
	})
}

// removeWorkspace deletes a workspace's record, checkpoint history and
// pending work in one transaction, if it is still at generation gen.
func (s *Store) removeWorkspace(id string, gen uint64) error {
	return s.updateTx(func(tx stateTx) error {
		w, err := getWS(tx, id)
		if err != nil {
			return err
		}
		if w.Generation != gen {
			return fmt.Errorf("%w: workspace %s moved to generation %d while it was being removed; try again", ErrStaleGeneration, id, w.Generation)
		}
		return tx.DeleteWorkspace(id)
	})
}

// decodeRecord decodes a record's JSON body into v, and refuses one that
// could not be written back (a time whose offset is 24 hours or more, or
// whose year is past 9999): every later update of it would fail, so the
// record is reported damaged where it is read.
func decodeRecord(b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return err
	}
	if _, err := json.Marshal(v); err != nil {
		return fmt.Errorf("it holds a value that cannot be written back: %w", err)
	}
	return nil
}
