package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/providers"
)

// ErrNoNativeCheckpoint: Restart found no native checkpoint to roll back to.
var ErrNoNativeCheckpoint = errors.New("no native checkpoint stored")

// nativeDue reports whether a native checkpoint of w is due: the provider
// has them and the native interval has passed since the last one.
func (l *Lifecycle) nativeDue(w Workspace, p providers.Provider) bool {
	return p.Capabilities().NativeCheckpoints && (w.Native == nil || l.clock.Now().Sub(w.Native.Time) >= l.cfg.NativeInterval)
}

// takeNative takes a native checkpoint before the portable capture (the
// writers are paused), when it is due: the native interval is its own
// clock, independent of the park throttle, so a portable capture retried
// after a failure takes no second one. The previous native checkpoint is
// then deleted; the store names it as pending work in the same transaction
// that stores the new one, so a failed delete, or a crash before it, is
// retried on a later park. A failure is recorded on the workspace and the
// capture goes on.
func (l *Lifecycle) takeNative(ctx context.Context, w Workspace, p providers.Provider, rec *Receipt) {
	if !l.nativeDue(w, p) {
		return
	}
	now := l.clock.Now()
	id, err := p.Checkpoint(ctx, w.Instance)
	if err != nil {
		rec.NativeError = err.Error()
		l.recordNative(w.ID, rec, err)
		return
	}
	var old *PendingDelete
	err = l.store.update(w.ID, func(tx stateTx, cur *Workspace) error {
		old = nil // the transaction may run again (statedb.DB.Update)
		if cur.Native != nil && cur.Native.ID != id {
			old = &PendingDelete{Workspace: w.ID, Provider: w.Provider, Checkpoint: cur.Native.ID, Since: now}
			if err := putPending(tx, old); err != nil {
				return err
			}
		}
		cur.Native = &NativeCheckpoint{ID: id, Time: now, Instance: w.Instance}
		if cur.LastGood != nil {
			cur.Native.Snapshot = cur.LastGood.Snapshot
		}
		return nil
	})
	if err != nil {
		rec.NativeError = fmt.Sprintf("native checkpoint %s taken but not recorded: %v", id, err)
		l.recordNative(w.ID, rec, err)
		return
	}
	rec.Native = id
	if old != nil {
		l.deleteNative(ctx, p, *old)
	}
}

// recordNative adds a native checkpoint failure to the recovery record;
// it does not count as a failed capture.
func (l *Lifecycle) recordNative(ws string, rec *Receipt, err error) {
	uerr := l.store.update(ws, func(_ stateTx, w *Workspace) error {
		w.addRecord(RecoveryRecord{Time: l.clock.Now(), Reason: rec.Reason, Outcome: NativeFailed, Error: l.redact(err.Error())})
		return nil
	})
	if uerr != nil {
		l.log.Error("recording a native checkpoint failure", "workspace", ws, "err", uerr)
	}
}

// deleteNative deletes a native checkpoint named by a pending record,
// removing the record on success and updating it on failure.
func (l *Lifecycle) deleteNative(ctx context.Context, p providers.Provider, pd PendingDelete) {
	err := p.DeleteCheckpoint(ctx, pd.Checkpoint)
	if err == nil {
		err = l.store.removePending(pd)
	} else {
		pd.Attempts++
		pd.LastError = err.Error()
		if perr := l.store.putPending(pd); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	if err != nil {
		l.log.Warn("deleting an old native checkpoint failed; retried on a later park", "workspace", pd.Workspace, "checkpoint", pd.Checkpoint, "err", l.redact(err.Error()))
	}
}

// retryPending retries the workspace's failed native checkpoint deletes.
func (l *Lifecycle) retryPending(ctx context.Context, ws string) {
	pending, err := l.store.Pending(ws)
	if err != nil {
		l.log.Error("reading pending work", "workspace", ws, "err", err)
		return
	}
	for _, pd := range pending {
		p, ok := l.provs[pd.Provider]
		if !ok {
			continue
		}
		l.deleteNative(ctx, p, pd)
	}
}

// RestartReceipt says what Restart did.
type RestartReceipt struct {
	Workspace  string                 `json:"workspace"`
	Checkpoint providers.CheckpointID `json:"checkpoint"`
	From       providers.InstanceID   `json:"from"`
	To         providers.InstanceID   `json:"to"`
	Generation uint64                 `json:"generation"`
	Time       time.Time              `json:"time"`
}

// Restart rolls workspace ws back to its stored native checkpoint, under
// the workspace's lease (it waits for a capture in flight). The workspace
// id stays; the instance id the provider returns is recorded, and the
// generation moves on. With no native checkpoint stored, or when the
// rollback fails, nothing is changed.
func (l *Lifecycle) Restart(ctx context.Context, ws string) (RestartReceipt, error) {
	release, err := l.lease(ctx, ws)
	if err != nil {
		return RestartReceipt{}, err
	}
	defer release()
	w, err := l.store.Workspace(ws)
	if err != nil {
		return RestartReceipt{}, err
	}
	if err := captureFence(w); err != nil {
		return RestartReceipt{}, fmt.Errorf("restart %s: %w", ws, err)
	}
	if w.Native == nil {
		return RestartReceipt{}, fmt.Errorf("restart %s: %w; nothing was changed (a provider that has native checkpoints takes one at a park or capture, before the portable capture)", ws, ErrNoNativeCheckpoint)
	}
	if w.Native.Instance != w.Instance {
		return RestartReceipt{}, fmt.Errorf("restart %s: %w for instance %s: the stored one (%s) was taken of instance %s; nothing was changed (the next park takes one)",
			ws, ErrNoNativeCheckpoint, w.Instance, w.Native.ID, w.Native.Instance)
	}
	p, err := l.provider(w)
	if err != nil {
		return RestartReceipt{}, err
	}
	to, err := p.Rollback(ctx, w.Instance, w.Native.ID)
	if err != nil {
		return RestartReceipt{}, fmt.Errorf("restart %s: rollback to native checkpoint %s failed; the workspace is unchanged: %w", ws, w.Native.ID, err)
	}
	r := RestartReceipt{Workspace: ws, Checkpoint: w.Native.ID, From: w.Instance, To: to, Time: l.clock.Now()}
	err = l.store.update(ws, func(_ stateTx, cur *Workspace) error {
		cur.Instance = to
		cur.Generation++
		cur.Fingerprint = nil // the next periodic round captures
		cur.LastRestart = &RestartRecord{Time: r.Time, Checkpoint: r.Checkpoint, From: r.From, To: to}
		if cur.Native != nil && cur.Native.ID == r.Checkpoint {
			cur.Native.Instance = to // the rolled-back instance is that checkpoint
		}
		r.Generation = cur.Generation
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("restart %s: rolled back to %s (instance %s) but recording it failed: %w", ws, r.Checkpoint, to, err)
	}
	return r, nil
}

// retireNative moves w's native checkpoint to the pending deletes when the
// workspace leaves the instance it was taken of (a recovery or a new
// instance after a wake): rolling the new instance back to it would
// restore another sandbox. In the caller's transaction.
func retireNative(tx stateTx, w *Workspace, now time.Time) error {
	if w.Native == nil {
		return nil
	}
	pd := PendingDelete{Workspace: w.ID, Provider: w.Provider, Checkpoint: w.Native.ID, Since: now}
	w.Native = nil
	return putPending(tx, &pd)
}
