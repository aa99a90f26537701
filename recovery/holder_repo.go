package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoHolds is the real Holder: each workspace's hold is a pin object in
// the repository (package prune), which `lifeboat forget`, the lifecycle's
// retention and prune honour in any process. It reads the repository's
// pins once and then keeps track of the ones it writes, so a hold costs
// one write and the removal of the pin it replaces, however many
// workspaces there are; a hold that is already what the pins say is not
// written again.
type RepoHolds struct {
	Repo *repo.Repository
	Now  func() time.Time // default time.Now

	mu     sync.Mutex
	loaded bool
	pins   map[string][]prune.Pin // by workspace: the pin objects that hold it
}

// load reads the repository's pins once. h.mu held.
func (h *RepoHolds) load(ctx context.Context) error {
	if h.loaded {
		return nil
	}
	all, err := prune.LoadPins(ctx, h.Repo)
	if err != nil {
		return err
	}
	h.pins = map[string][]prune.Pin{}
	for _, p := range all.Objects {
		h.pins[p.Workspace] = append(h.pins[p.Workspace], p)
	}
	h.loaded = true
	return nil
}

// Hold implements Holder.
func (h *RepoHolds) Hold(ctx context.Context, hs HoldSet) error {
	pin := prune.Pin{Workspace: hs.Workspace, All: hs.All, AllWhy: hs.AllWhy}
	for id, why := range hs.Snapshots {
		bid, err := blob.ParseID(id)
		if err != nil {
			return fmt.Errorf("hold of %s: snapshot %q: %w", hs.Workspace, id, err)
		}
		pin.Snapshots = append(pin.Snapshots, prune.PinnedSnapshot{ID: bid, Why: why})
	}
	slices.SortFunc(pin.Snapshots, func(a, b prune.PinnedSnapshot) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.load(ctx); err != nil {
		return err
	}
	old := h.pins[hs.Workspace]
	if len(old) == 1 && samePin(old[0], pin) {
		return nil
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	ids := make([]blob.ID, len(old))
	for i, p := range old {
		ids[i] = p.ID
	}
	got, err := prune.ReplacePin(ctx, h.Repo, pin, now(), ids)
	switch {
	case got.ID == (blob.ID{}): // not written: the old pins stand
	case err != nil: // written, but the old ones may remain
		h.pins[hs.Workspace] = append([]prune.Pin{got}, old...)
	default:
		h.pins[hs.Workspace] = []prune.Pin{got}
	}
	return err
}

// samePin reports whether two pins hold the same snapshots for the same
// reasons.
func samePin(a, b prune.Pin) bool {
	return a.Workspace == b.Workspace && a.All == b.All && a.AllWhy == b.AllWhy &&
		slices.EqualFunc(a.Snapshots, b.Snapshots, func(x, y prune.PinnedSnapshot) bool { return x == y })
}

// Release implements Holder.
func (h *RepoHolds) Release(ctx context.Context, ws string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := prune.RemovePins(ctx, h.Repo, ws)
	if err == nil && h.pins != nil {
		delete(h.pins, ws)
	}
	return err
}

// Present implements Holder: the snapshot's manifest is still stored.
func (h *RepoHolds) Present(ctx context.Context, id string) error {
	bid, err := blob.ParseID(id)
	if err != nil {
		return err
	}
	if _, _, err := h.Repo.LoadObject(ctx, crypt.KindSnapshot, bid); err != nil {
		return fmt.Errorf("snapshot %s was removed before its hold was recorded (a forget in another process?): %w", bid.Short(), err)
	}
	return nil
}

// ForgetAll implements Holder: every snapshot of ws, readable or not
// (a manifest that does not load names no workspace and is left alone).
func (h *RepoHolds) ForgetAll(ctx context.Context, ws string) (int, error) {
	snaps, _, err := snapshot.List(ctx, h.Repo, ws)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range snaps {
		if err := h.Repo.RemoveObject(ctx, crypt.KindSnapshot, m.ID); err != nil && !errors.Is(err, backend.ErrNotFound) {
			return n, fmt.Errorf("removing snapshot %s: %w", m.ID.Short(), err)
		}
		n++
	}
	return n, nil
}
