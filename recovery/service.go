package recovery

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/recovery/dirlock"
	"lifeboat/recovery/statedb"
	"lifeboat/repo"
)

// ServiceConfig sets up a recovery Service. Lifecycle, Restorer and
// StateDir are required.
type ServiceConfig struct {
	Lifecycle *Lifecycle // its store, providers and clock are used
	Restorer  Restorer   // RepoRestorer is the real one
	// StateDir holds the restore's local staging trees
	// (<StateDir>/recovery/<operation>) and the directory-merge locks
	// (<StateDir>/locks/directory-merge).
	StateDir string
	// CheckInterval is how often Run inspects each workspace, and how long
	// a step waiting on a provider error waits; default 1 min.
	CheckInterval time.Duration
	// LockWait bounds waiting for a busy target's lock; default 30 s,
	// negative: one attempt. A step that still finds the lock busy waits
	// like one that met a provider outage (retried after CheckInterval).
	LockWait time.Duration
	// CopyBack is the retry policy of writing the restored tree into the
	// replacement; default dirlock.DefaultRetryPolicy.
	CopyBack dirlock.RetryPolicy
	Logger   *slog.Logger
	// LeaseTTL is how long a server's claim on an operation it drives
	// lasts without renewal, on a state store several servers share
	// (renewed every third of it); another server resumes the operation
	// after it lapsed. Default 30 s.
	LeaseTTL time.Duration
	// TestStep is for tests only (leave it nil): it is called at every
	// crash point of an operation with the point, "before:<state>" once
	// the step's intent is stored and "after:<state>" once its external
	// call returned, before that is recorded, so a test can stop or kill
	// the process there.
	TestStep func(point string)
}

// Service is the recovery half of the lifecycle: loss detection, the
// offer, approved recovery operations, fencing, lost processes and repair
// holds. One Service per Lifecycle; its methods are safe for concurrent
// use. Create it with NewService, then call Resume to continue operations
// a previous process left unfinished.
type Service struct {
	cfg   ServiceConfig
	lc    *Lifecycle
	store *Store
	clock Clock
	log   *slog.Logger
	locks *dirlock.Locker

	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	running map[string]chan struct{} // operation id -> closed when its driver stops
	leases  map[string]*opLease      // operation id -> the driver lease held (shared stores)
	subs    map[chan Event]struct{}
	restart keylock.Map[string] // per restart idempotency key
	hooks   serviceHooks
}

// serviceHooks let tests stop an operation at a step, as a crash would.
type serviceHooks struct {
	// step is called with the operation and a point ("before:<state>"
	// once the intent is stored, "after:<state>" once its external call
	// returned, before that is recorded); a non-nil error stops the driver
	// there without writing anything more.
	step func(op Operation, point string) error
}

// NewService returns a Service over the lifecycle's store. Before it
// drives anything, it removes what earlier restores left in StateDir
// (cleanLocalTrees).
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Lifecycle == nil || cfg.Restorer == nil || cfg.StateDir == "" {
		return nil, errors.New("recovery: a Lifecycle, a Restorer and a StateDir are required")
	}
	setDefault(&cfg.CheckInterval, time.Minute)
	setDefault(&cfg.LeaseTTL, 30*time.Second)
	if cfg.LockWait == 0 {
		cfg.LockWait = dirlock.DefaultWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	lk, err := dirlock.New(cfg.StateDir, dirlock.Options{Wait: cfg.LockWait, Clock: cfg.Lifecycle.clock})
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, lc: cfg.Lifecycle, store: cfg.Lifecycle.store, clock: cfg.Lifecycle.clock, log: cfg.Logger,
		locks: lk, running: map[string]chan struct{}{}, leases: map[string]*opLease{}, subs: map[chan Event]struct{}{}}
	if cfg.TestStep != nil {
		s.hooks.step = func(_ Operation, point string) error { cfg.TestStep(point); return nil }
	}
	s.base, s.stop = context.WithCancel(repo.WithWarn(context.Background(), func(msg string) { s.log.Warn(msg) }))
	if err := s.markInterruptedRestarts(); err != nil {
		s.stop()
		return nil, err
	}
	s.cleanLocalTrees()
	if err := s.listen(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// Close stops the running operations (each stays at its persisted step,
// resumed by the next Resume) and waits for them.
func (s *Service) Close() {
	s.stop()
	s.wg.Wait()
}

// Resume starts a driver for every unfinished operation that has none;
// call it once the service is open, to continue what a previous process
// left. On a store one process holds, none of them runs elsewhere; on a
// shared one, a driver first claims the operation's lease, so an
// operation another live server drives is left to it. It does not wait
// for them; Wait does.
func (s *Service) Resume(ctx context.Context) {
	s.resume(false)
	// A replacement held by a process that died before it stopped it.
	holds, err := s.RepairHolds()
	if err != nil {
		s.log.Error("resuming: reading repair holds", "err", err)
	}
	for _, h := range holds {
		if h.Stop == nil {
			if _, err := s.StopHold(ctx, h.ID); err != nil {
				s.log.Error("resuming: stopping a held replacement", "hold", h.ID, "err", err)
			}
		}
	}
}

// resume starts the unfinished operations; with due, only those whose
// wait after a provider error is over.
func (s *Service) resume(due bool) {
	ops, err := s.store.Operations("")
	if err != nil {
		s.log.Error("resuming recovery operations", "err", err)
		return
	}
	now := s.clock.Now()
	for _, op := range ops {
		if !op.State.Terminal() && (!due || !now.Before(op.RetryAt)) {
			s.start(op.ID)
		}
	}
}

// start runs the driver of operation id unless one runs already.
func (s *Service) start(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[id]; ok || s.base.Err() != nil {
		return
	}
	done := make(chan struct{})
	s.running[id] = done
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.running, id)
			s.mu.Unlock()
			close(done)
		}()
		s.driveLeased(id)
	})
}

// driveLeased drives operation id while this process holds its lease. On
// a shared store the lease is claimed first (an operation another server
// drives is left alone) and renewed while the driver runs; when renewal
// fails the driver is stopped, and every write it makes after another
// server claimed the operation fails in its transaction; a driver stopped
// either way removes this server's local tree of the operation.
func (s *Service) driveLeased(id string) {
	if !s.store.Shared() {
		s.drive(s.base, id)
		return
	}
	name, owner, ttl := opLeaseName(id), s.store.owner, s.cfg.LeaseTTL
	epoch, err := s.store.db.ClaimLease(s.base, name, owner, s.clock.Now(), ttl)
	if err != nil {
		if !errors.Is(err, statedb.ErrLeaseHeld) {
			s.log.Error("claiming a recovery operation", "operation", id, "err", err)
		}
		return
	}
	s.mu.Lock()
	s.leases[id] = &opLease{owner: owner, epoch: epoch}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(s.base)
	renewed := make(chan struct{})
	var unrenewed bool // read once renewed is closed
	go func() {
		defer close(renewed)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.clock.After(ttl / 3):
			}
			if err := s.store.db.RenewLease(ctx, name, owner, epoch, s.clock.Now(), ttl); err != nil {
				if ctx.Err() == nil {
					s.log.Error("renewing the lease of a recovery operation; this server stops driving it", "operation", id, "err", err)
					unrenewed = true
				}
				cancel()
				return
			}
		}
	}()
	lost := s.drive(ctx, id)
	cancel()
	<-renewed
	s.mu.Lock()
	delete(s.leases, id)
	s.mu.Unlock()
	if lost || unrenewed {
		// Whoever drives it next restores into a tree of its own.
		s.stoppedDriving(id)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), txTimeout)
	defer rcancel()
	if err := s.store.db.ReleaseLease(rctx, name, owner, epoch); err != nil {
		s.log.Warn("releasing the lease of a recovery operation (it lapses on its own)", "operation", id, "err", err)
	}
}

// lease is the driver lease this process holds on operation id, or nil.
func (s *Service) lease(id string) *opLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[id]
}

// Wait waits until operation id's driver stops (it ended, or waits on a
// provider error until RetryAt) and returns the operation as stored.
func (s *Service) Wait(ctx context.Context, id string) (Operation, error) {
	s.mu.Lock()
	done := s.running[id]
	s.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return Operation{}, ctx.Err()
		}
	}
	return s.store.Operation(id)
}

// Operation returns one recovery operation.
func (s *Service) Operation(id string) (Operation, error) { return s.store.Operation(id) }

// Operations returns the recovery operations of a workspace, oldest first.
func (s *Service) Operations(ws string) ([]Operation, error) { return s.store.Operations(ws) }

// resolveCheckpoint returns the snapshot id of the checkpoint of ws that
// ref names: its whole id, or a prefix of at least 8 hex digits that one
// of its checkpoints alone starts with (the CLI shows 16). A ref that
// names none fails with ErrStaleOffer. A workspace without a last good
// checkpoint gets ref back: the approval says what is wrong.
func (s *Service) resolveCheckpoint(ws, ref string) (string, error) {
	w, err := s.store.Workspace(ws)
	if err != nil || w.LastGood == nil {
		return ref, nil
	}
	hist, err := s.store.Checkpoints(ws)
	if err != nil {
		return "", err
	}
	ref = strings.ToLower(ref) // ids are lower-case hex
	match := ""
	for _, cp := range append(hist, *w.LastGood) {
		switch {
		case cp.Snapshot == ref:
			return ref, nil
		case len(ref) < 8 || !strings.HasPrefix(cp.Snapshot, ref) || cp.Snapshot == match:
		case match != "":
			return "", fmt.Errorf("%w: %s starts both %s and %s, checkpoints of %s; give more of the id", ErrStaleOffer, ref, short(match), short(cp.Snapshot), ws)
		default:
			match = cp.Snapshot
		}
	}
	if match == "" {
		return "", fmt.Errorf("%w: %s is not one of the checkpoints of %s; `lifeboat recovery offer %s` lists those that can be approved", ErrStaleOffer, ref, ws, ws)
	}
	return match, nil
}

// Approve starts recovering workspace ws from checkpoint, the snapshot id
// its offer showed: its last good checkpoint, or one of the earlier
// checkpoints the offer lists as candidates (when the last good one is
// damaged or gone), by its id or a unique prefix of 8 or more hex digits
// (resolveCheckpoint). key is the client's idempotency key: a repeated or
// concurrent approval with the same key returns the same operation and
// never starts a second one. The workspace must be lost (the provider
// confirmed its instance missing); a checkpoint the offer does not list
// fails with ErrStaleOffer (fetch the offer again).
func (s *Service) Approve(ctx context.Context, ws, checkpoint, key string) (Operation, error) {
	if key == "" || len(key) > 200 {
		return Operation{}, fmt.Errorf("approve %s: an idempotency key of 1 to 200 bytes is required", ws)
	}
	if checkpoint == "" {
		return Operation{}, fmt.Errorf("approve %s: name the checkpoint the offer showed", ws)
	}
	// A key used before answers with its operation, or says it was used
	// for another checkpoint, whatever this one names.
	resolved, err := s.resolveCheckpoint(ws, checkpoint)
	if err != nil && s.approvedBefore(key) == "" {
		return Operation{}, fmt.Errorf("approve recovery of %s: %w", ws, err)
	}
	if err == nil {
		checkpoint = resolved
	}
	// An earlier checkpoint must still be readable in the repository
	// (the last good one is checked by the restore itself).
	if w, err := s.store.Workspace(ws); err == nil && w.LastGood != nil && w.LastGood.Snapshot != checkpoint && s.approvedBefore(key) == "" {
		if err := s.lc.repoWork(ctx, func() error { return s.cfg.Restorer.Check(ctx, checkpoint) }); err != nil {
			return Operation{}, fmt.Errorf("approve recovery of %s: %w: checkpoint %s cannot be read: %v; pick another candidate of the offer", ws, ErrStaleOffer, short(checkpoint), err)
		}
	}
	now := s.clock.Now()
	var op Operation
	fresh := false
	err = s.store.updateTx(func(tx stateTx) error {
		fresh = false
		id, err := tx.OperationByKey(key)
		if err != nil {
			return err
		}
		if id != "" {
			got, err := getOp(tx, id)
			if err != nil {
				return err
			}
			if got.Workspace != ws || got.Checkpoint != checkpoint {
				return fmt.Errorf("%w: key %q approved checkpoint %s of workspace %s", ErrKeyReused, key, got.Checkpoint, got.Workspace)
			}
			op = *got
			return nil
		}
		w, err := getWS(tx, ws)
		if err != nil {
			return err
		}
		if err := offerable(w); err != nil {
			return err
		}
		cp := w.LastGood
		if cp.Snapshot != checkpoint {
			if cp, err = findCheckpoint(tx, ws, checkpoint); err != nil {
				return err
			}
			if cp == nil {
				return fmt.Errorf("%w: approved %s, which is neither the last good checkpoint of %s (%s, taken %s) nor one of its earlier checkpoints; review the offer again",
					ErrStaleOffer, checkpoint, ws, w.LastGood.Snapshot, w.LastGood.Time.UTC().Format(time.RFC3339))
			}
		}
		id = "op-" + randomHex(8)
		op = Operation{ID: id, Workspace: ws, IdempotencyKey: key, Checkpoint: checkpoint, CheckpointTime: cp.Time,
			Provider: w.Provider, OldInstance: w.Instance, Generation: w.Generation, State: OpApproved,
			CreateKey: "lifeboat-recovery/" + ws + "/" + id, Processes: cp.Processes, Created: now, Updated: now,
			History: []Transition{{State: OpApproved, Time: now}}}
		op.LocalTree = filepath.Join(s.cfg.StateDir, "recovery", id)
		w.Operation = id
		h := *w.Health
		h.State, h.Since, h.Action = HealthRecovering, now, "recovery operation "+id+" is running; bot operations wait for it"
		w.Health = &h
		fresh = true
		if err := putOp(tx, &op); err != nil {
			return err
		}
		return putWS(tx, w)
	})
	if err != nil {
		return Operation{}, fmt.Errorf("approve recovery of %s: %w", ws, err)
	}
	if fresh {
		s.lc.SyncHold(context.WithoutCancel(ctx), ws)
		s.publish(Event{Workspace: ws, Kind: EventOperation, Operation: op.ID, State: HealthRecovering, OpState: op.State})
	}
	if !op.State.Terminal() {
		s.start(op.ID)
	}
	return op, nil
}

// approvedBefore returns the operation an idempotency key started, if any.
func (s *Service) approvedBefore(key string) string {
	var id string
	_ = s.store.view(func(tx stateTx) error {
		id, _ = tx.OperationByKey(key)
		return nil
	})
	return id
}

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

// offerable says why workspace w cannot be offered recovery, if it cannot.
func offerable(w *Workspace) error {
	switch {
	case w.Operation != "":
		return fmt.Errorf("%w: operation %s is running for %s", ErrRecovering, w.Operation, w.ID)
	case w.Health == nil || w.Health.State != HealthLost:
		state := "never inspected"
		switch {
		case w.Health == nil:
		case w.Health.State == HealthOK: // the API's recovery_state word
			state = "healthy"
		default:
			state = string(w.Health.State)
		}
		return fmt.Errorf("%w: %s is %s; recovery is offered only once the provider confirms the instance %s missing", ErrNotLost, w.ID, state, w.Instance)
	case w.LastGood == nil:
		return fmt.Errorf("%w: %s was lost before its first checkpoint; nothing can be recovered", ErrNoCheckpoint, w.ID)
	}
	return nil
}

// Guard is what a bot operation on workspace ws asks first: ErrRecovering
// while a recovery runs, nil otherwise.
func (s *Service) Guard(ws string) error {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return err
	}
	return guard(w)
}

func guard(w Workspace) error {
	if w.Operation != "" {
		return fmt.Errorf("%w: operation %s is restoring %s into a replacement; try again when it ends", ErrRecovering, w.Operation, w.ID)
	}
	return nil
}

// Fence checks a request issued for generation gen and instance inst of
// workspace ws: ErrRecovering while a recovery runs, ErrStaleGeneration
// when the workspace has moved on to another instance or generation.
func (s *Service) Fence(ws string, gen uint64, inst string) error {
	w, err := s.store.Workspace(ws)
	if err != nil {
		return err
	}
	return fence(w, gen, inst)
}

func fence(w Workspace, gen uint64, inst string) error {
	if err := guard(w); err != nil {
		return err
	}
	if gen != w.Generation || inst != string(w.Instance) {
		return fmt.Errorf("%w: %s issued for instance %s generation %d, the workspace is now instance %s generation %d; refused",
			ErrStaleGeneration, w.ID, inst, gen, w.Instance, w.Generation)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func sortOps(ops []Operation) {
	slices.SortFunc(ops, func(a, b Operation) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Lifecycle is the checkpoint lifecycle the service recovers workspaces of.
func (s *Service) Lifecycle() *Lifecycle { return s.lc }
