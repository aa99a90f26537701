package recovery

import (
	"context"
	"fmt"

	"lifeboat/blob"
	"lifeboat/profile"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Restorer rebuilds checkpoints for recovery (RepoRestorer is the real one).
type Restorer interface {
	// Describe says what a checkpoint holds, for the offer.
	Describe(ctx context.Context, snapshot string) (SnapshotInfo, error)
	// Check says whether a checkpoint can be read (its manifest, and the
	// sensitive part when the key opens it): the offer lists the earlier
	// checkpoints that can.
	Check(ctx context.Context, snapshot string) error
	// Restore rebuilds the snapshot into dir, which must not exist:
	// every file verified against its content ids, browser profiles
	// validated in the staging tree before it is switched to dir.
	Restore(ctx context.Context, snapshot, dir string) (RestoreInfo, error)
}

// SnapshotInfo is what Describe found.
type SnapshotInfo struct {
	Profiles      []string // browser profiles (paths in the workspace)
	ProfileLocked bool     // they exist but this key cannot open the sensitive tier
}

// RestoreInfo is what Restore put in place.
type RestoreInfo struct {
	Files    uint64
	Bytes    uint64
	Profiles []string // browser profiles restored
	Problems []string // what profile validation flagged
}

// RepoRestorer restores from a repository with snapshot.Restore, grafting
// the browser profiles of the sensitive part when the key opens it.
type RepoRestorer struct {
	Repo    *repo.Repository
	Workers int
}

func (r *RepoRestorer) load(ctx context.Context, id string) (*snapshot.Manifest, *snapshot.SensitivePart, bool, error) {
	bid, err := blob.ParseID(id)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %q: %w", id, err)
	}
	m, err := snapshot.LoadManifest(ctx, r.Repo, bid)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %s: %w", bid.Short(), err)
	}
	if m.Sensitive == nil {
		return m, nil, false, nil
	}
	if !hasTier(r.Repo, blob.Sensitive) {
		return m, nil, true, nil
	}
	part, err := snapshot.LoadSensitivePart(ctx, r.Repo, m)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %s: %w", bid.Short(), err)
	}
	return m, part, false, nil
}

// Describe implements Restorer.
func (r *RepoRestorer) Describe(ctx context.Context, id string) (SnapshotInfo, error) {
	_, part, locked, err := r.load(ctx, id)
	info := SnapshotInfo{ProfileLocked: locked}
	if part != nil {
		for _, t := range part.Trees {
			info.Profiles = append(info.Profiles, t.Path)
		}
	}
	return info, err
}

// Check implements Restorer.
func (r *RepoRestorer) Check(ctx context.Context, id string) error {
	_, _, _, err := r.load(ctx, id)
	return err
}

// Restore implements Restorer.
func (r *RepoRestorer) Restore(ctx context.Context, id, dir string) (RestoreInfo, error) {
	m, part, _, err := r.load(ctx, id)
	if err != nil {
		return RestoreInfo{}, err
	}
	var info RestoreInfo
	o := snapshot.RestoreOptions{Target: dir, Workers: r.Workers}
	if part != nil {
		var ps []profile.Profile
		for _, t := range part.Trees {
			ps = append(ps, profile.Profile{Rel: t.Path, Kind: profile.Kind(t.Kind)})
			info.Profiles = append(info.Profiles, t.Path)
		}
		o.Grafts = part.Grafts()
		o.Validate = func(ctx context.Context, staging string) error {
			probs, err := profile.Validate(ctx, staging, ps)
			for _, p := range probs {
				info.Problems = append(info.Problems, fmt.Sprintf("%s/%s: %s", p.Profile, p.Path, p.What))
			}
			return err
		}
	}
	res, err := snapshot.Restore(ctx, r.Repo, m, o)
	info.Files, info.Bytes = res.Files, res.Bytes
	return info, err
}
