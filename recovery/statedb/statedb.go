package statedb

import (
	"context"
	"errors"
	"time"
)

// Kind is a kind of record.
type Kind uint8

const (
	Workspaces Kind = iota // by workspace id
	Operations             // recovery operations, by id
	Holds                  // repair holds, by id
	Restarts               // process restarts, by idempotency key
	Pending                // pending native checkpoint deletes, by PendingKey
)

var kindNames = [...]string{"workspaces", "operations", "holds", "restarts", "pending"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// PendingKey is the key of a pending delete of checkpoint cp of ws.
func PendingKey(ws, cp string) string { return ws + "\x00" + cp }

// Record is one record to store: its JSON body and the fields a shared
// database keeps in columns of their own (for its constraints).
type Record struct {
	Key  string
	Body []byte // JSON
	// Workspace names the workspace an operation, hold, restart or
	// pending delete belongs to.
	Workspace string
	// Operations only: the idempotency key that approved it, and
	// whether it is still active (not ended).
	IdemKey string
	Active  bool
}

// Tx is one transaction.
type Tx interface {
	// Get returns the body of record key, or nil when there is none.
	Get(k Kind, key string) ([]byte, error)
	// Put writes a record. For Operations it also records IdemKey; a
	// second active operation of one workspace, or a second operation
	// with one IdemKey, fails with ErrConflict (on a shared database).
	Put(k Kind, r Record) error
	// Delete removes a record (nothing when absent).
	Delete(k Kind, key string) error
	// List calls fn with every record of kind k, in bytewise key order.
	List(k Kind, fn func(key string, body []byte) error) error
	// OperationByKey returns the id of the operation approved with
	// idempotency key idem, or "".
	OperationByKey(idem string) (string, error)
	// PutCheckpoint adds a checkpoint to ws's history, then drops the
	// oldest ones beyond keep. The history is ordered by time (Unix
	// nanoseconds), then snapshot id.
	PutCheckpoint(ws string, unixNano int64, snapshot string, body []byte, keep int) error
	// Checkpoints calls fn with every checkpoint of ws, oldest first.
	Checkpoints(ws string, fn func(body []byte) error) error
	// DeleteWorkspace removes workspace ws, its checkpoint history and its
	// pending deletes.
	DeleteWorkspace(ws string) error
	// CheckLease fails with ErrLeaseLost unless owner holds lease name at
	// epoch (always succeeds on a store one process holds).
	CheckLease(name, owner string, epoch uint64) error
}

// DB is a state store's storage.
type DB interface {
	// View runs fn in a read-only transaction that sees one state.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a serializable transaction and commits it when fn
	// returns nil. fn may run more than once (see the package doc).
	Update(ctx context.Context, fn func(Tx) error) error
	// ID names the store (random, made when it was created); Salt is its
	// secret salt (32 random bytes, made when it was created).
	ID() string
	Salt() []byte
	// Where names the store for people: a file path, or a URL without its
	// password.
	Where() string
	// Shared reports whether other processes use the store at once.
	Shared() bool
	// Lock takes the named lock among every process of the store; with
	// wait false it fails with ErrLocked at once when another holds it.
	// The lock goes when unlock is called or the process dies. On a shared
	// store it also goes when the session holding it ends (a dropped
	// connection, a restarted database): lost is closed once a check of
	// the session fails (PostgreSQL: a ping every 2 s, each allowed
	// 10 s); on a store one process holds, lost is nil, and the lock is
	// always granted (callers lock in-process).
	Lock(ctx context.Context, name string, wait bool) (unlock func(), lost <-chan struct{}, err error)
	// ClaimLease gives lease name to owner until now+ttl, if it is free,
	// expired (before now) or already owner's; it returns the new epoch,
	// or ErrLeaseHeld.
	ClaimLease(ctx context.Context, name, owner string, now time.Time, ttl time.Duration) (uint64, error)
	// RenewLease extends owner's lease at epoch to now+ttl, or fails with
	// ErrLeaseLost when another claimed it.
	RenewLease(ctx context.Context, name, owner string, epoch uint64, now time.Time, ttl time.Duration) error
	// ReleaseLease frees owner's lease at epoch (nothing if it moved on).
	ReleaseLease(ctx context.Context, name, owner string, epoch uint64) error
	// Publish sends an event body to every process of the store but this
	// one (origin names this process); nothing on a store one process holds.
	Publish(ctx context.Context, origin string, body []byte) error
	// Listen calls fn, in order and from one goroutine, with every event
	// other processes publish after Listen returns, until ctx ends (then
	// done closes). On a store one process holds, there are none.
	Listen(ctx context.Context, origin string, fn func(body []byte)) (done <-chan struct{}, err error)
	Close() error
}

var (
	// ErrBusy: another process has the (embedded) state store open.
	ErrBusy = errors.New("state store in use by another lifeboat process")
	// ErrNewer: the state store was written by a newer lifeboat.
	ErrNewer = errors.New("state store written by a newer lifeboat")
	// ErrConflict: a write would break a uniqueness rule of the store.
	ErrConflict = errors.New("state store conflict")
	// ErrLocked: the named lock is held by another process.
	ErrLocked = errors.New("held by another lifeboat process")
	// ErrLeaseHeld: the lease is held by another process and not expired.
	ErrLeaseHeld = errors.New("lease held by another lifeboat process")
	// ErrLeaseLost: another process claimed the lease.
	ErrLeaseLost = errors.New("lease lost to another lifeboat process")
	// ErrUnavailable: the state database cannot be reached.
	ErrUnavailable = errors.New("state database unavailable")
)
