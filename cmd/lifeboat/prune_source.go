package main

import (
	"context"
	"errors"
	"fmt"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// snapshotSource lets prune (which may not import snapshot/) list
// snapshots and walk what they reach.
type snapshotSource struct{ r *repo.Repository }

func (s snapshotSource) Snapshots(ctx context.Context) ([]blob.ID, error) {
	var ids []blob.ID
	err := s.r.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error { ids = append(ids, id); return nil })
	return ids, err
}

func (s snapshotSource) Reach(ctx context.Context, id blob.ID, m prune.Marker) error {
	err := snapshot.Reach(ctx, s.r, id, m)
	if errors.Is(err, snapshot.ErrDamaged) {
		return fmt.Errorf("%w: %w", prune.ErrDamaged, err)
	}
	return err
}

// pruneSnapshots converts manifests for the retention policy.
func pruneSnapshots(ms []*snapshot.Manifest) []prune.Snapshot {
	out := make([]prune.Snapshot, len(ms))
	for i, m := range ms {
		out[i] = prune.Snapshot{ID: m.ID, Workspace: m.Workspace, Time: m.Time, Complete: m.Complete, Tags: m.Tags}
	}
	return out
}
