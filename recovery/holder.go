package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"
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
// Retain releases the holds of every workspace not in keep (a workspace
// removed from the store while its hold could not be released).
type Holder interface {
	Hold(ctx context.Context, h HoldSet) error
	Release(ctx context.Context, ws string) error
	Retain(ctx context.Context, keep []string) error
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
	err := l.repoWork(ctx, func() error { return l.syncHold(ctx, ws) })
	if err != nil {
		l.log.Error("recording the workspace's hold in the repository; the previous hold stays", "workspace", ws, "err", err)
	}
}

// syncHold writes ws's hold as its record says, under its hold lock; the
// caller runs it as repository work.
func (l *Lifecycle) syncHold(ctx context.Context, ws string) error {
	defer l.holds.Lock(ws)()
	w, err := l.store.Workspace(ws)
	if errors.Is(err, ErrUnknownWorkspace) {
		return nil // removed meanwhile: RemoveWorkspace releases its hold
	}
	if err != nil {
		return err
	}
	return l.cfg.Holds.Hold(ctx, wantHold(w))
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
		var errs []error
		ids := make([]string, len(wss))
		for i, w := range wss {
			ids[i] = w.ID
			if err := l.syncHold(ctx, w.ID); err != nil {
				errs = append(errs, fmt.Errorf("workspace %s: %w", w.ID, err))
			}
		}
		// Only workspaces the store still has are kept: one removed while
		// its hold could not be released loses its hold now.
		keep := ids[:0:0]
		for _, id := range ids {
			if _, err := l.store.Workspace(id); err == nil {
				keep = append(keep, id)
			}
		}
		return errors.Join(append(errs, l.cfg.Holds.Retain(ctx, keep))...)
	})
}

// holdPromoting holds snapshot, about to become ws's last good
// checkpoint, along with what ws holds now, then checks it is still in
// the repository (a forget that read the holds before this one was
// written may have removed it).
func (l *Lifecycle) holdPromoting(ctx context.Context, ws, snapshot string) error {
	if l.cfg.Holds == nil {
		return nil
	}
	return l.repoWork(ctx, func() error {
		defer l.holds.Lock(ws)()
		w, err := l.store.Workspace(ws)
		if err != nil {
			return err
		}
		h := wantHold(w)
		h.Snapshots[snapshot] = "being promoted to the last good checkpoint"
		if err := l.cfg.Holds.Hold(ctx, h); err != nil {
			return err
		}
		return l.cfg.Holds.Present(ctx, snapshot)
	})
}
