package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"lifeboat/providers"
	"lifeboat/recovery/statedb"
)

// OpState is a step of a recovery operation. The operation is persisted
// at every step, with the intent written before the external call it
// names, so a restart resumes it from there (Service.Resume).
type OpState string

const (
	OpApproved    OpState = "approved"     // approved; nothing external done yet
	OpCreating    OpState = "creating"     // Create with the operation's key (safe to repeat)
	OpRestoring   OpState = "restoring"    // restore into local staging, then WriteFiles into the replacement
	OpValidating  OpState = "validating"   // the replacement's staging tree is compared with the restored one
	OpSwitching   OpState = "switching"    // Switch, then one transaction records the new instance and generation
	OpRollingBack OpState = "rolling_back" // the replacement is being destroyed after a failure
	OpRecovered   OpState = "recovered"    // terminal: the workspace runs on the replacement
	OpFailed      OpState = "failed"       // terminal: nothing switched; the workspace is lost again
)

// Terminal reports whether the state is final.
func (s OpState) Terminal() bool { return s == OpRecovered || s == OpFailed }

// Operation is one approved recovery of a workspace.
type Operation struct {
	ID             string               `json:"id"`
	Workspace      string               `json:"workspace"`
	IdempotencyKey string               `json:"idempotency_key"`
	Checkpoint     string               `json:"checkpoint"` // the snapshot approved
	CheckpointTime time.Time            `json:"checkpoint_time"`
	Provider       string               `json:"provider"`
	OldInstance    providers.InstanceID `json:"old_instance"`
	Generation     uint64               `json:"generation"` // the generation it was issued for
	State          OpState              `json:"state"`
	// CreateKey is the idempotency key of the replacement's Create: an
	// orphan from an interrupted create is found again by it.
	CreateKey   string               `json:"create_key"`
	Replacement providers.InstanceID `json:"replacement,omitempty"`
	LocalTree   string               `json:"local_tree,omitempty"` // the restore's local staging tree
	Digest      string               `json:"digest,omitempty"`     // content digest of LocalTree
	// Keep is what the provider keeps (asked once, before the restore):
	// Digest and every later comparison cover exactly that.
	Keep      providers.FileSupport `json:"keep"`
	Staging   string                `json:"staging,omitempty"`   // the staging directory in the replacement
	Validated string                `json:"validated,omitempty"` // how the replacement's tree was checked
	Profiles  []string              `json:"profiles,omitempty"`  // browser profiles restored
	Problems  []string              `json:"problems,omitempty"`  // profile validation findings
	// NewGeneration is the workspace generation after the switch.
	NewGeneration uint64          `json:"new_generation,omitempty"`
	Processes     []ProcessRecord `json:"processes"`      // recorded with the checkpoint: reported lost
	Hold          string          `json:"hold,omitempty"` // repair hold recorded when it failed
	Error         string          `json:"error,omitempty"`
	// Action says what fixes a failed operation, for people.
	Action string `json:"action,omitempty"`
	// LastError and RetryAt: the step is waiting on a provider error and
	// is tried again by the schedule (or Resume) after RetryAt.
	LastError string       `json:"last_error,omitempty"`
	RetryAt   time.Time    `json:"retry_at,omitzero"`
	Created   time.Time    `json:"created"`
	Updated   time.Time    `json:"updated"`
	History   []Transition `json:"history"`
}

// Transition is one state change of an operation.
type Transition struct {
	State OpState   `json:"state"`
	Time  time.Time `json:"time"`
	Note  string    `json:"note,omitempty"`
}

var (
	// ErrRecovering: a recovery operation is running for the workspace;
	// bot operations and captures wait for it to end.
	ErrRecovering = errors.New("workspace is being recovered")
	// ErrNotLost: recovery is offered only for a workspace whose instance
	// the provider confirmed missing.
	ErrNotLost = errors.New("workspace is not lost")
	// ErrNoCheckpoint: the workspace has no good checkpoint to recover.
	ErrNoCheckpoint = errors.New("workspace has no good checkpoint")
	// ErrStaleOffer: the approval names a checkpoint that is not the one
	// the current offer shows.
	ErrStaleOffer = errors.New("approval names a checkpoint the offer no longer shows")
	// ErrKeyReused: an idempotency key was reused for another request.
	ErrKeyReused = errors.New("idempotency key already used for a different request")
	// ErrUnknownOperation: no operation with that id.
	ErrUnknownOperation = errors.New("unknown recovery operation")
	// ErrStaleGeneration: an operation issued for an older generation or
	// instance of the workspace.
	ErrStaleGeneration = errors.New("issued for another instance or generation of the workspace")
)

func getJSON[T any](tx stateTx, kind statedb.Kind, key string, what string) (*T, error) {
	v, err := tx.Get(kind, key)
	if err != nil || v == nil {
		return nil, err
	}
	var out T
	if err := decodeRecord(v, &out); err != nil {
		return nil, fmt.Errorf("state store: %s %s does not decode: %w", what, key, err)
	}
	return &out, nil
}

// listJSON reads every record of kind in one transaction and returns
// those keep accepts (every one when keep is nil), decoded. A record that
// does not decode is an error naming it: name is a format of its key,
// such as "operation %s".
func listJSON[T any](s *Store, kind statedb.Kind, name string, keep func(*T) bool) ([]T, error) {
	var out []T
	err := s.view(func(tx stateTx) error {
		out = nil
		return tx.List(kind, func(k string, v []byte) error {
			var r T
			if err := decodeRecord(v, &r); err != nil {
				return fmt.Errorf("state store: "+name+" does not decode: %w", k, err)
			}
			if keep == nil || keep(&r) {
				out = append(out, r)
			}
			return nil
		})
	})
	return out, err
}

// putJSON writes record r of kind with v as its body.
func putJSON(tx stateTx, kind statedb.Kind, r statedb.Record, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.Body = b
	return tx.Put(kind, r)
}

func putOp(tx stateTx, op *Operation) error {
	return putJSON(tx, statedb.Operations, statedb.Record{Key: op.ID, Workspace: op.Workspace, IdemKey: op.IdempotencyKey,
		Active: !op.State.Terminal()}, op)
}

func putHold(tx stateTx, h *Hold) error {
	return putJSON(tx, statedb.Holds, statedb.Record{Key: h.ID, Workspace: h.Workspace}, h)
}

func putRestart(tx stateTx, r *ProcessRestart) error {
	return putJSON(tx, statedb.Restarts, statedb.Record{Key: r.Key, Workspace: r.Workspace}, r)
}

func getOp(tx stateTx, id string) (*Operation, error) {
	op, err := getJSON[Operation](tx, statedb.Operations, id, "operation")
	if err == nil && op == nil {
		err = fmt.Errorf("%w %q", ErrUnknownOperation, id)
	}
	return op, err
}

// Operation returns one recovery operation.
func (s *Store) Operation(id string) (Operation, error) {
	var op Operation
	err := s.view(func(tx stateTx) error {
		got, err := getOp(tx, id)
		if err == nil {
			op = *got
		}
		return err
	})
	return op, err
}

// Operations returns the recovery operations of workspace ws (all when
// ws is empty), oldest first.
func (s *Store) Operations(ws string) ([]Operation, error) {
	out, err := listJSON(s, statedb.Operations, "operation %s", func(op *Operation) bool { return ws == "" || op.Workspace == ws })
	sortOps(out)
	return out, err
}

// opLease is the driver lease of an operation this process holds: every
// write of the operation checks it in the writing transaction.
type opLease struct {
	owner string
	epoch uint64
}

// updateOp changes an operation and, when fn returns a workspace change,
// its workspace, in one transaction. With a lease, the transaction fails
// with statedb.ErrLeaseLost when another process took the operation over.
func (s *Store) updateOp(id string, lease *opLease, now time.Time, fn func(tx stateTx, op *Operation, w *Workspace) error) (Operation, error) {
	var out Operation
	err := s.updateTx(func(tx stateTx) error {
		if lease != nil {
			if err := tx.CheckLease(opLeaseName(id), lease.owner, lease.epoch); err != nil {
				return fmt.Errorf("operation %s: %w", id, err)
			}
		}
		op, err := getOp(tx, id)
		if err != nil {
			return err
		}
		w, err := getWS(tx, op.Workspace)
		if err != nil {
			return err
		}
		before := op.State
		if err := fn(tx, op, w); err != nil {
			return err
		}
		op.Updated = now
		if op.State != before {
			op.History = append(op.History, Transition{State: op.State, Time: now, Note: op.Error})
		}
		out = *op
		if err := putOp(tx, op); err != nil {
			return err
		}
		return putWS(tx, w)
	})
	return out, err
}

// opLeaseName is the name of operation id's driver lease.
func opLeaseName(id string) string { return "operation/" + id }
