package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"lifeboat/backend"
	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery/dirlock"
	"lifeboat/recovery/statedb"
	"lifeboat/repo"
)

// errHookStop: a test hook stopped the driver, as a crash would.
var errHookStop = errors.New("stopped by a test hook")

// drive runs operation id step by step until it ends, waits on a provider
// error (parked until RetryAt), or ctx ends. Every step stores its intent
// before its external call, and each external call is safe to repeat
// after a crash: Create by its key, the restore and WriteFiles from
// scratch, Switch by checking whether the replacement already holds the
// restored tree. It reports whether it stopped because another server
// took the operation over.
func (s *Service) drive(ctx context.Context, id string) (lost bool) {
	for ctx.Err() == nil {
		op, err := s.store.Operation(id)
		if err != nil {
			s.log.Error("recovery operation", "operation", id, "err", err)
			return false
		}
		if op.State.Terminal() {
			return false
		}
		err = s.step(ctx, op)
		switch {
		case err == nil:
			continue
		case errors.Is(err, errHookStop) || ctx.Err() != nil:
			return false // stays at its persisted step; Resume continues it
		case errors.Is(err, statedb.ErrLeaseLost):
			s.log.Error("recovery operation taken over by another server; this one stops driving it", "operation", id, "err", err)
			return true
		case transient(err) && !errors.As(err, new(*permanentError)):
			s.park(op, err)
			return false
		}
		s.fail(op, err)
	}
	return false
}

// permanentError is a failure that trying again cannot mend.
type permanentError struct{ error }

func (e *permanentError) Unwrap() error { return e.error }

// transient errors leave the operation at its step, tried again later.
func transient(err error) bool {
	return errors.Is(err, providers.ErrUnavailable) || errors.Is(err, providers.ErrRateLimited) ||
		errors.Is(err, providers.ErrUnauthorized) || errors.Is(err, dirlock.ErrBusy) || errors.Is(err, repo.ErrLocked) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, statedb.ErrUnavailable) ||
		errors.Is(err, backend.ErrUnavailable)
}

func (s *Service) hook(op Operation, point string) error {
	if s.hooks.step != nil {
		return s.hooks.step(op, point)
	}
	return nil
}

// step runs the operation's current step and records the next state.
func (s *Service) step(ctx context.Context, op Operation) error {
	p, err := s.lc.provider(Workspace{ID: op.Workspace, Provider: op.Provider})
	if err != nil {
		return err
	}
	if err := s.hook(op, "before:"+string(op.State)); err != nil {
		return err
	}
	switch op.State {
	case OpApproved:
		return s.advance(op.ID, func(op *Operation, _ *Workspace) error { op.State = OpCreating; return nil })
	case OpCreating:
		return s.create(ctx, op, p)
	case OpRestoring:
		return s.restore(ctx, op, p)
	case OpValidating:
		return s.validate(op, p)
	case OpSwitching:
		return s.switchIn(ctx, op, p)
	case OpRollingBack:
		return s.rollBack(ctx, op, p)
	}
	return fmt.Errorf("operation %s: unknown state %q", op.ID, op.State)
}

// create confirms once more that the old instance is missing, then makes
// (or finds, by the operation's key) the replacement.
func (s *Service) create(ctx context.Context, op Operation, p providers.Provider) error {
	st, err := p.Inspect(ctx, op.OldInstance)
	if err != nil {
		return fmt.Errorf("confirming instance %s is still missing before creating a replacement: %w", op.OldInstance, err)
	}
	if st.State != providers.Missing {
		return s.finish(op, fmt.Sprintf("instance %s is %s again; nothing was created", op.OldInstance, st.State), HealthOK, "")
	}
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: op.CreateKey,
		Labels: map[string]string{"lifeboat-workspace": op.Workspace, "lifeboat-operation": op.ID}})
	if herr := s.hook(op, "after:creating"); herr != nil {
		return herr
	}
	if err != nil {
		return fmt.Errorf("creating the replacement: %w", err)
	}
	return s.advance(op.ID, func(op *Operation, _ *Workspace) error {
		op.Replacement, op.State = id, OpRestoring
		return nil
	})
}

// target is the directory-merge lock target of an instance's workspace:
// its directory for the local provider, a name under the state directory
// for the others.
func (s *Service) target(p providers.Provider, id providers.InstanceID) string {
	if root, ok := localRoot(p); ok {
		return filepath.Join(root, string(id))
	}
	return filepath.Join(s.cfg.StateDir, "targets", p.Name(), string(id))
}

// localRoot is the root directory of a local provider (local.Provider, or
// a wrapper of one): its instances and staging trees are readable here.
func localRoot(p providers.Provider) (string, bool) {
	lp, ok := p.(interface{ Root() string })
	if !ok || p.Name() != local.Name {
		return "", false
	}
	return lp.Root(), true
}

// restore rebuilds the checkpoint into the local staging tree, then copies
// it into a staging directory of the replacement.
func (s *Service) restore(ctx context.Context, op Operation, p providers.Provider) error {
	// What the provider keeps is asked once and stored with the digest:
	// the comparisons after WriteFiles and Switch use the same answer.
	op.Keep = fileSupport(ctx, p)
	if s.store.Shared() {
		// Another server may have started the operation: the local tree
		// is this server's own.
		op.LocalTree = s.localTree(op.ID)
	}
	info, digest, err := s.restoreLocal(ctx, op)
	if err != nil {
		return err
	}
	lk, err := s.locks.Lock(ctx, s.target(p, op.Replacement), "copy-back")
	if err != nil {
		return err
	}
	var staging string
	var last *dirlock.Attempt
	err = dirlock.CopyBack(ctx, s.clock, s.cfg.CopyBack, func(ctx context.Context, a *dirlock.Attempt) error {
		var err error
		last = a
		// The adapter reports its first write into the replacement: a
		// failure after it is never retried.
		staging, err = p.WriteFiles(providers.WithWriteStarted(ctx, a.Writing), op.Replacement, op.LocalTree)
		return err
	})
	_ = lk.Unlock()
	if herr := s.hook(op, "after:restoring"); herr != nil {
		return herr
	}
	var cbe *dirlock.CopyBackError
	if errors.As(err, &cbe) {
		switch {
		case cbe.Class == dirlock.Cancelled && ctx.Err() != nil:
			return ctx.Err()
		case cbe.Class == dirlock.Cancelled:
			// A deadline of the provider's own (a dial timeout), not ours:
			// an outage, tried again after the check interval.
			return fmt.Errorf("%w: %w", providers.ErrUnavailable, err)
		case cbe.Class == dirlock.AfterWrite, last != nil && last.Wrote():
			// Half-written, whatever stopped it: kept for an operator.
			return s.holdAndFail(op, p, cbe)
		}
		// Nothing was written, and trying again would not help: the
		// replacement is destroyed and the operation fails with the path
		// and what to do.
		return &permanentError{err}
	}
	if err != nil {
		return err
	}
	keep, tree := op.Keep, op.LocalTree
	return s.advance(op.ID, func(op *Operation, _ *Workspace) error {
		op.Staging, op.Digest, op.State, op.LocalTree = staging, digest, OpValidating, tree
		op.Keep = keep
		op.Profiles, op.Problems = info.Profiles, info.Problems
		return nil
	})
}

// restoreLocal restores into op.LocalTree afresh, under its lock.
func (s *Service) restoreLocal(ctx context.Context, op Operation) (RestoreInfo, string, error) {
	if err := os.MkdirAll(filepath.Dir(op.LocalTree), 0o700); err != nil {
		return RestoreInfo{}, "", err
	}
	lk, err := s.locks.Lock(ctx, op.LocalTree, "restore")
	if err != nil {
		return RestoreInfo{}, "", err
	}
	defer lk.Unlock()
	if err := os.RemoveAll(op.LocalTree); err != nil { // an interrupted attempt's tree
		return RestoreInfo{}, "", err
	}
	var info RestoreInfo
	err = s.lc.repoWork(ctx, func() error {
		var err error
		info, err = s.cfg.Restorer.Restore(ctx, op.Checkpoint, op.LocalTree)
		return err
	})
	if err != nil {
		return info, "", fmt.Errorf("restoring checkpoint %s: %w", op.Checkpoint, err)
	}
	digest, err := treeDigest(op.LocalTree, op.Keep)
	return info, digest, err
}

// validate checks the replacement's staging tree against the restored one
// where it is readable here (the local provider); elsewhere the tree was
// verified locally (content ids, profile validation) before WriteFiles.
func (s *Service) validate(op Operation, p providers.Provider) error {
	how := "restored tree verified here (every file against its content ids, browser profiles validated) before WriteFiles"
	if _, ok := localRoot(p); ok {
		d, err := treeDigest(op.Staging, op.Keep)
		if err != nil {
			return err
		}
		if d != op.Digest {
			return fmt.Errorf("the staging tree %s in replacement %s differs from the restored checkpoint", op.Staging, op.Replacement)
		}
		how = "staging tree in the replacement matches the restored checkpoint (content digest " + d[:16] + ")"
	}
	return s.advance(op.ID, func(op *Operation, _ *Workspace) error {
		op.Validated, op.State = how, OpSwitching
		return nil
	})
}

// switchIn switches the staging tree in, then records the replacement as
// the workspace's instance with a new generation, in one transaction.
func (s *Service) switchIn(ctx context.Context, op Operation, p providers.Provider) error {
	lk, err := s.locks.Lock(ctx, s.target(p, op.Replacement), "switch")
	if err != nil {
		return err
	}
	defer lk.Unlock()
	if err := lk.Verify(); err != nil {
		return err
	}
	err = p.Switch(ctx, op.Replacement, op.Staging)
	if herr := s.hook(op, "after:switching"); herr != nil {
		return herr
	}
	// Whether the switch worked now or before a restart (then the staging
	// directory is gone and Switch fails), the replacement must hold the
	// restored tree before it becomes the workspace's instance.
	ok, herr := s.holdsTree(ctx, p, op)
	switch {
	case !ok && err != nil:
		return fmt.Errorf("switching the restored tree into %s: %w", op.Replacement, err)
	case herr != nil:
		return fmt.Errorf("reading replacement %s after the switch: %w", op.Replacement, herr)
	case !ok:
		return fmt.Errorf("replacement %s does not hold the restored checkpoint after the switch", op.Replacement)
	}
	err = s.advanceTx(op.ID, func(tx stateTx, op *Operation, w *Workspace) error {
		if w.Operation != op.ID || w.Generation != op.Generation {
			return fmt.Errorf("%w: operation %s was issued for generation %d, workspace %s is at %d", ErrStaleGeneration, op.ID, op.Generation, w.ID, w.Generation)
		}
		now := s.clock.Now()
		if w.LastGood == nil || w.LastGood.Snapshot != op.Checkpoint {
			// Recovered from an earlier checkpoint (the last good one was
			// damaged or gone): that is what the workspace now holds.
			cp, err := findCheckpoint(tx, w.ID, op.Checkpoint)
			if err != nil {
				return err
			}
			if cp == nil {
				return fmt.Errorf("checkpoint %s of %s is no longer in its history", op.Checkpoint, w.ID)
			}
			w.LastGood = cp
		}
		if err := retireNative(tx, w, now); err != nil {
			return err
		}
		w.Instance, w.Generation = op.Replacement, w.Generation+1
		w.Operation, w.Fingerprint, w.InFlight = "", nil, nil
		w.Health = &Health{State: HealthOK, Instance: op.Replacement, Detail: "recovered by " + op.ID, CheckedAt: now,
			NextCheck: now.Add(s.cfg.CheckInterval), Since: now}
		w.Lost = &LostSet{Operation: op.ID, Generation: w.Generation, Checkpoint: op.Checkpoint, Processes: op.Processes}
		op.NewGeneration, op.State, op.LastError = w.Generation, OpRecovered, ""
		return nil
	})
	if err == nil {
		_ = os.RemoveAll(op.LocalTree)
	}
	return err
}

// holdsTree reports whether the replacement's files are the restored tree.
func (s *Service) holdsTree(ctx context.Context, p providers.Provider, op Operation) (bool, error) {
	f, err := p.ReadFiles(ctx, op.Replacement)
	if err != nil {
		return false, err
	}
	defer f.Close()
	d, err := treeDigest(f.Dir(), op.Keep)
	return err == nil && d == op.Digest, err
}

// rollBack destroys the replacement of a failed operation (unless a
// repair hold keeps it) and ends it as failed.
func (s *Service) rollBack(ctx context.Context, op Operation, p providers.Provider) error {
	if op.Replacement != "" && op.Hold == "" {
		if err := p.Destroy(ctx, op.Replacement); err != nil {
			return fmt.Errorf("destroying replacement %s of the failed recovery: %w", op.Replacement, err)
		}
	}
	return s.finish(op, op.Error, HealthLost, "")
}

// fail ends the operation after err: through rolling_back when a
// replacement exists, else at once.
func (s *Service) fail(op Operation, err error) {
	if op.State == OpRollingBack { // the rollback itself failed for good
		s.park(op, err)
		return
	}
	if op.Replacement == "" {
		op.Action = actionFor(err, op)
		if ferr := s.finish(op, err.Error(), HealthLost, ""); ferr != nil {
			s.log.Error("recording a failed recovery", "operation", op.ID, "err", ferr, "failure", err)
		}
		return
	}
	if aerr := s.advance(op.ID, func(o *Operation, _ *Workspace) error {
		o.State, o.Error, o.Action = OpRollingBack, err.Error(), actionFor(err, op)
		return nil
	}); aerr != nil {
		s.log.Error("recording a failed recovery", "operation", op.ID, "err", aerr, "failure", err)
	}
}

// finish ends op as failed with why; the workspace gets health state h
// again (lost: a new approval may follow) and is free for bot use.
func (s *Service) finish(op Operation, why string, h HealthState, hold string) error {
	action := op.Action
	err := s.advance(op.ID, func(op *Operation, w *Workspace) error {
		op.State, op.Error, op.LastError = OpFailed, why, ""
		if op.Action == "" {
			op.Action = action
		}
		if op.Action == "" {
			op.Action = "the last good checkpoint is unchanged; fix the cause named in the error, then approve the recovery again with a new idempotency key"
		}
		if w.Operation == op.ID {
			w.Operation = ""
			s.failedHealth(w, op, h)
		}
		return nil
	})
	if err == nil && op.Hold == "" && hold == "" {
		_ = os.RemoveAll(op.LocalTree)
	}
	return err
}

func (s *Service) failedHealth(w *Workspace, op *Operation, h HealthState) {
	now := s.clock.Now()
	nh := Health{State: h, Instance: w.Instance, Detail: "recovery " + op.ID + " failed: " + op.Error, CheckedAt: now,
		NextCheck: now.Add(s.cfg.CheckInterval), Since: now}
	if h == HealthLost {
		nh.Action = "the last good checkpoint is unchanged; fix the cause and approve recovery again (with a new idempotency key)"
	}
	w.Health = &nh
}

// park leaves op at its step after a provider error; the schedule (or
// Resume) tries it again after RetryAt.
func (s *Service) park(op Operation, err error) {
	if s.base.Err() != nil {
		return
	}
	at := s.clock.Now().Add(s.cfg.CheckInterval)
	if d, ok := providers.RetryAfter(err); ok && d > s.cfg.CheckInterval {
		at = s.clock.Now().Add(d)
	}
	if aerr := s.advance(op.ID, func(op *Operation, _ *Workspace) error {
		op.LastError, op.RetryAt = err.Error(), at
		return nil
	}); aerr != nil {
		s.log.Error("recording a waiting recovery", "operation", op.ID, "err", aerr, "cause", err)
	}
}

// advance changes an operation (and its workspace) in one transaction and
// publishes the change.
func (s *Service) advance(id string, fn func(op *Operation, w *Workspace) error) error {
	return s.advanceTx(id, func(_ stateTx, op *Operation, w *Workspace) error { return fn(op, w) })
}

// advanceTx is advance with the transaction, for records written with it.
func (s *Service) advanceTx(id string, fn func(tx stateTx, op *Operation, w *Workspace) error) error {
	var before OpState
	op, err := s.store.updateOp(id, s.lease(id), s.clock.Now(), func(tx stateTx, op *Operation, w *Workspace) error {
		before = op.State
		return fn(tx, op, w)
	})
	if err == nil {
		e := Event{Workspace: op.Workspace, Kind: EventOperation, Operation: op.ID, OpState: op.State}
		if op.State != before && op.State.Terminal() {
			e.State = map[OpState]HealthState{OpRecovered: HealthOK, OpFailed: HealthLost}[op.State]
			s.lc.SyncHold(context.WithoutCancel(s.base), op.Workspace)
		}
		s.publish(e)
	}
	return err
}
