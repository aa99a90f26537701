package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/recovery/statedb"
)

// Holder records in the repository which snapshots the lifecycle needs
// kept, so that retention and prune, in this process or any other, never
// remove them: a workspace's last good checkpoint, and while it is lost or
// being recovered every checkpoint it may be recovered from.
//
// Contract: Hold replaces the workspace's previous hold only after the new
// one is durable (a crash in between leaves both, and both hold). Release
// removes every hold of the workspace. ForgetAll removes every snapshot of
// the workspace from the repository (prune frees their data). Present
// reports whether a snapshot is still in the repository: a forget in
// another process that read the holds before a new one was written may
// have removed it.
//
// Retain releases the holds of every workspace for which keep is false (a
// workspace removed from the store while its hold could not be released).
// Refresh reads the holds from the repository again: a holder may take a
// hold it wrote for still there until then.
type Holder interface {
	Refresh(ctx context.Context) error
	Hold(ctx context.Context, h HoldSet) error
	Release(ctx context.Context, ws string) error
	Retain(ctx context.Context, keep func(ws string) bool) error
	ForgetAll(ctx context.Context, ws string) (int, error)
	Present(ctx context.Context, snapshot string) error
}

// HoldSet is what the lifecycle holds for one workspace.
type HoldSet struct {
	Workspace string
	// Snapshots held, by id (hex), with why.
	Snapshots map[string]string
	// All holds every snapshot of the workspace, with AllWhy.
	All    bool
	AllWhy string
}

// wantHold is what the lifecycle must hold for w now.
func wantHold(w Workspace) HoldSet {
	h := HoldSet{Workspace: w.ID, Snapshots: map[string]string{}}
	if w.LastGood != nil {
		h.Snapshots[w.LastGood.Snapshot] = "last good checkpoint of the lifecycle (taken " + w.LastGood.Time.UTC().Format(time.RFC3339) + ")"
	}
	switch {
	case w.Operation != "":
		h.All, h.AllWhy = true, "recovery operation "+w.Operation+" is running"
	case w.Health != nil && w.Health.State == HealthLost:
		h.All, h.AllWhy = true, "the instance is lost: the recovery offer may name any of its checkpoints"
	}
	return h
}

// SyncHold brings the repository's hold of workspace ws in line with its
// record. A failure is logged and the previous hold stays: it still holds
// the last good checkpoint it was written for (a promotion writes the new
// one's hold before the store names it), but not, for instance, every
// checkpoint of a workspace that has just been found lost; the next
// scheduled check (SyncHolds) writes it again.
func (l *Lifecycle) SyncHold(ctx context.Context, ws string) {
	if l.cfg.Holds == nil {
		return
	}
	err := l.repoWork(ctx, func() error { return l.syncHold(ctx, ws, true) })
	if err != nil {
		l.log.Error("recording the workspace's hold in the repository; the previous hold stays", "workspace", ws, "err", err)
	}
}

// holdLockWait bounds the wait for a workspace's hold lock: a server
// paused (SIGSTOP, a VM freeze) while it held one keeps it in the state
// store until it runs again.
const holdLockWait = time.Minute

// lockHold takes workspace ws's hold lock: in this process, and on a
// shared store among all its servers. A hold is written under it from the
// record as read after the lock was taken, so no server writes a hold
// from an older reading over a newer one (which would drop, say, the
// checkpoint another server has just promoted). With wait false it fails
// at once with statedb.ErrLocked when someone holds it; otherwise it
// waits up to holdLockWait.
func (l *Lifecycle) lockHold(ctx context.Context, ws string, wait bool) (unlock func(), err error) {
	var local func()
	if wait {
		local = l.holds.Lock(ws)
	} else if unlock, ok := l.holds.TryLock(ws); ok {
		local = unlock
	} else {
		return nil, fmt.Errorf("workspace %s: its hold lock: %w", ws, statedb.ErrLocked)
	}
	if l.hooks.holdWait != nil {
		l.hooks.holdWait(ws)
	}
	wctx, cancel := context.WithTimeout(ctx, holdLockWait)
	defer cancel()
	shared, _, err := l.store.db.Lock(wctx, holdLockName(ws), wait)
	if err != nil {
		local()
		return nil, fmt.Errorf("workspace %s: taking its hold lock in the state store: %w", ws, err)
	}
	return func() { shared(); local() }, nil
}

func holdLockName(ws string) string { return "hold/" + ws }

// syncHold writes ws's hold as its record says, under its hold lock; the
// caller runs it as repository work. Unless wait, a hold whose lock is
// taken is left to whoever holds it (it writes the hold from the record
// under the lock) and syncHold returns nil.
func (l *Lifecycle) syncHold(ctx context.Context, ws string, wait bool) error {
	unlock, err := l.lockHold(ctx, ws, wait)
	if !wait && errors.Is(err, statedb.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	return l.writeHold(ctx, ws, "")
}

// writeHold writes ws's hold as its record says now, with promoting (a
// snapshot id, or "") held as well. The caller holds ws's hold lock.
func (l *Lifecycle) writeHold(ctx context.Context, ws, promoting string) error {
	w, err := l.store.Workspace(ws)
	if errors.Is(err, ErrUnknownWorkspace) {
		return nil // removed meanwhile: RemoveWorkspace releases its hold
	}
	if err != nil {
		return err
	}
	h := wantHold(w)
	if promoting != "" {
		h.Snapshots[promoting] = "being promoted to the last good checkpoint"
	}
	return l.cfg.Holds.Hold(ctx, h)
}

// SyncHolds is SyncHold for every workspace, then the release of the
// holds of workspaces no longer in the store, all as one piece of
// repository work (the server runs it at its start and with every
// scheduled check, so a hold write that failed is written again, and one
// removed by hand comes back; an unchanged hold is only checked).
func (l *Lifecycle) SyncHolds(ctx context.Context) error {
	if l.cfg.Holds == nil {
		return nil
	}
	wss, err := l.store.Workspaces()
	if err != nil {
		return err
	}
	return l.repoWork(ctx, func() error {
		if err := l.cfg.Holds.Refresh(ctx); err != nil {
			return err
		}
		var errs []error
		for _, w := range wss {
			// Without waiting: a hold being written is written from the
			// record, and a server paused while it held a hold lock must
			// not stop this pass (and the scheduled check behind it).
			if err := l.syncHold(ctx, w.ID, false); err != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", w.ID, err))
			}
		}
		// Only workspaces the store still has are kept, asked when a hold
		// is about to go: one removed while its hold could not be
		// released loses its hold now, and one another server added after
		// the listing above keeps the hold that server wrote.
		keep := func(ws string) bool {
			_, err := l.store.Workspace(ws)
			return !errors.Is(err, ErrUnknownWorkspace)
		}
		return errors.Join(append(errs, l.cfg.Holds.Retain(ctx, keep))...)
	})
}

// errHold marks a promotion that failed before the store was asked: the
// snapshot could not be held in the repository.
var errHold = errors.New("recording its hold in the repository")

// promoteHeld makes snapshot ws's last good checkpoint: commit is the
// store's promotion. All of it runs as repository work under ws's hold
// lock: the repository first holds snapshot along with what ws holds now,
// and it is checked to be still there (a forget that read the holds
// before may have removed it); then commit runs; then the hold is written
// again from the record commit left (without snapshot if commit failed).
// The lock keeps every other hold write of ws, in any server, out of the
// window between the first write and commit, where a hold written from
// the record as it was before commit would drop snapshot. A failure to
// write the last hold is logged: the one before it holds snapshot.
func (l *Lifecycle) promoteHeld(ctx context.Context, ws, snapshot string, commit func() error) error {
	if l.cfg.Holds == nil {
		return commit()
	}
	return l.repoWork(ctx, func() error {
		unlock, err := l.lockHold(ctx, ws, true)
		if err != nil {
			return fmt.Errorf("%w: %w", errHold, err)
		}
		defer unlock()
		if err := l.writeHold(ctx, ws, snapshot); err != nil {
			return fmt.Errorf("%w: %w", errHold, err)
		}
		if err := l.cfg.Holds.Present(ctx, snapshot); err != nil {
			return fmt.Errorf("%w: %w", errHold, err)
		}
		cerr := commit()
		if err := l.writeHold(ctx, ws, ""); err != nil {
			l.log.Error("recording the workspace's hold in the repository; the previous hold stays", "workspace", ws, "err", err)
		}
		return cerr
	})
}
