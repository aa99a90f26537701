package recovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
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
type Holder interface {
	Hold(ctx context.Context, h HoldSet) error
	Release(ctx context.Context, ws string) error
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

// holdLocks serialises the hold writes of one workspace, so the newest
// state is written last, and remembers what was written last.
type holdLocks struct {
	keyLocks
	mu   sync.Mutex
	last map[string]string // the hold last written, as compared
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

func (h HoldSet) key() string {
	k := fmt.Sprintf("%s|%t|%s", h.Workspace, h.All, h.AllWhy)
	for _, id := range slices.Sorted(maps.Keys(h.Snapshots)) {
		k += "|" + id + "=" + h.Snapshots[id]
	}
	return k
}

// SyncHold brings the repository's hold of workspace ws in line with its
// record. A failure is logged and the previous hold stays: it still holds
// the last good checkpoint it was written for (a promotion writes the new
// one's hold before the store names it), but not, for instance, every
// checkpoint of a workspace that has just been found lost.
func (l *Lifecycle) SyncHold(ctx context.Context, ws string) {
	if l.cfg.Holds == nil {
		return
	}
	defer l.holds.lock(ws)()
	w, err := l.store.Workspace(ws)
	if errors.Is(err, ErrUnknownWorkspace) {
		return
	}
	if err == nil {
		err = l.writeHold(ctx, wantHold(w))
	}
	if err != nil {
		l.log.Error("recording the workspace's hold in the repository; the previous hold stays", "workspace", ws, "err", err)
	}
}

// SyncHolds is SyncHold for every workspace (once at the server's start,
// so a store older than holds gets them).
func (l *Lifecycle) SyncHolds(ctx context.Context) error {
	wss, err := l.store.Workspaces()
	for _, w := range wss {
		l.SyncHold(ctx, w.ID)
	}
	return err
}

// holdPromoting holds snapshot, about to become ws's last good
// checkpoint, along with what ws holds now.
func (l *Lifecycle) holdPromoting(ctx context.Context, ws, snapshot string) error {
	if l.cfg.Holds == nil {
		return nil
	}
	defer l.holds.lock(ws)()
	w, err := l.store.Workspace(ws)
	if err != nil {
		return err
	}
	h := wantHold(w)
	h.Snapshots[snapshot] = "being promoted to the last good checkpoint"
	if err := l.writeHold(ctx, h); err != nil {
		return err
	}
	// Held from now on; it must not have gone before the hold was seen.
	return l.repoWork(ctx, func() error { return l.cfg.Holds.Present(ctx, snapshot) })
}

// writeHold writes h unless it is what was written last. l.holds.lock(ws) held.
func (l *Lifecycle) writeHold(ctx context.Context, h HoldSet) error {
	k := h.key()
	l.holds.mu.Lock()
	same := l.holds.last != nil && l.holds.last[h.Workspace] == k
	l.holds.mu.Unlock()
	if same {
		return nil
	}
	if err := l.repoWork(ctx, func() error { return l.cfg.Holds.Hold(ctx, h) }); err != nil {
		return err
	}
	l.holds.mu.Lock()
	if l.holds.last == nil {
		l.holds.last = map[string]string{}
	}
	l.holds.last[h.Workspace] = k
	l.holds.mu.Unlock()
	return nil
}
