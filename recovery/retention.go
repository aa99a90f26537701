package recovery

import (
	"context"
	"fmt"
	"time"

	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoRetention is the real Retention: it applies the workspace's stored
// policy (`lifeboat policy set`) to its snapshots and removes the ones the
// policy does not keep, as `lifeboat forget` does. A workspace without a
// stored policy is left alone. The newest complete snapshot, the one just
// promoted, is always kept (prune.Apply keeps the last good root), and so
// is lastGood whatever the policy says. Only
// snapshot objects are removed; `lifeboat prune` frees their data. The
// caller holds a shared repository lock, as for the capture.
type RepoRetention struct {
	Repo *repo.Repository
	Now  func() time.Time // default time.Now
}

// Apply implements Retention.
func (rr RepoRetention) Apply(ctx context.Context, ws, lastGood string) error {
	stored, err := prune.Policies(ctx, rr.Repo)
	if err != nil {
		return fmt.Errorf("retention for %s: %w", ws, err)
	}
	sp, ok := stored[ws]
	if !ok {
		return nil
	}
	snaps, _, err := snapshot.List(ctx, rr.Repo, ws) // snapshots that do not load are left alone
	if err != nil {
		return fmt.Errorf("retention for %s: %w", ws, err)
	}
	in := make([]prune.Snapshot, len(snaps))
	for i, m := range snaps {
		in[i] = prune.Snapshot{ID: m.ID, Workspace: m.Workspace, Time: m.Time, Complete: m.Complete, Tags: m.Tags}
	}
	now := time.Now
	if rr.Now != nil {
		now = rr.Now
	}
	for _, d := range prune.Apply(sp.Policy, ws, in, now()).Decisions {
		if d.Keep || d.Snapshot.ID.String() == lastGood {
			continue
		}
		if err := rr.Repo.RemoveObject(ctx, crypt.KindSnapshot, d.Snapshot.ID); err != nil {
			return fmt.Errorf("retention for %s: removing snapshot %s: %w", ws, d.Snapshot.ID.Short(), err)
		}
	}
	return nil
}
