package recovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoHolds is the real Holder: each workspace's hold is a pin object in
// the repository (prune.SetPin), which `lifeboat forget`, the lifecycle's
// retention and prune honour in any process.
type RepoHolds struct {
	Repo *repo.Repository
	Now  func() time.Time // default time.Now
}

// Hold implements Holder.
func (h RepoHolds) Hold(ctx context.Context, hs HoldSet) error {
	pin := prune.Pin{Version: 1, Workspace: hs.Workspace, All: hs.All, AllWhy: hs.AllWhy}
	for id, why := range hs.Snapshots {
		bid, err := blob.ParseID(id)
		if err != nil {
			return fmt.Errorf("hold of %s: snapshot %q: %w", hs.Workspace, id, err)
		}
		pin.Snapshots = append(pin.Snapshots, prune.PinnedSnapshot{ID: bid, Why: why})
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	_, err := prune.SetPin(ctx, h.Repo, pin, now())
	return err
}

// Release implements Holder.
func (h RepoHolds) Release(ctx context.Context, ws string) error {
	_, err := prune.RemovePins(ctx, h.Repo, ws)
	return err
}

// Present implements Holder: the snapshot's manifest is still stored.
func (h RepoHolds) Present(ctx context.Context, id string) error {
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
func (h RepoHolds) ForgetAll(ctx context.Context, ws string) (int, error) {
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
