package recovery

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/profile"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/restore"
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
	Contents      Contents // what kinds of entries the workspace files hold
}

// Contents counts the entries of a checkpoint that not every provider can
// hold, with a few of their paths as examples.
type Contents struct {
	HardLinks Kinds `json:"hard_links"` // names that share a file with an earlier one
	Xattrs    Kinds `json:"xattrs"`     // entries with extended attributes
	Fifos     Kinds `json:"fifos"`
	Skipped   Kinds `json:"skipped"` // sockets and device nodes: recorded, never captured
}

// Kinds is a count of entries and the first few paths.
type Kinds struct {
	N     int      `json:"n"`
	Paths []string `json:"paths"`
}

func (k *Kinds) add(p string) {
	k.N++
	if len(k.Paths) < 3 {
		k.Paths = append(k.Paths, p)
	}
}

// String is "N (a, b, c, ...)".
func (k Kinds) String() string {
	s := fmt.Sprintf("%d (%s", k.N, strings.Join(k.Paths, ", "))
	if k.N > len(k.Paths) {
		s += ", ..."
	}
	return s + ")"
}

// RestoreInfo is what Restore put in place.
type RestoreInfo struct {
	Files    uint64
	Bytes    uint64
	Profiles []string // browser profiles restored
	Problems []string // what profile validation flagged
}

// RepoRestorer restores from a repository with restore.Run, grafting
// the browser profiles of the sensitive part when the key opens it.
type RepoRestorer struct {
	Repo    *repo.Repository
	Workers int

	contents sync.Map // snapshot id -> Contents (a snapshot never changes)
}

// load loads snapshot id's manifest and, when the key opens it, its
// sensitive part, after syncing the local index: the snapshot may have
// been taken by another process (another server of a fleet) since this
// one last did, and the repository lock the caller runs under may be
// shared with work that began before (repo.SharedLock).
func (r *RepoRestorer) load(ctx context.Context, id string) (*snapshot.Manifest, *snapshot.SensitivePart, bool, error) {
	bid, err := blob.ParseID(id)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %q: %w", id, err)
	}
	if _, err := r.Repo.SyncIndex(ctx); err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %s: syncing the index: %w", bid.Short(), err)
	}
	m, err := snapshot.LoadManifest(ctx, r.Repo, bid)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %s: %w", bid.Short(), err)
	}
	if m.Sensitive == nil {
		return m, nil, false, nil
	}
	if !slices.Contains(r.Repo.Tiers(), blob.Sensitive) {
		return m, nil, true, nil
	}
	part, err := snapshot.LoadSensitivePart(ctx, r.Repo, m)
	if err != nil {
		return nil, nil, false, fmt.Errorf("checkpoint %s: %w", bid.Short(), err)
	}
	return m, part, false, nil
}

// Describe implements Restorer. It walks the workspace's trees once per
// snapshot (the answer is kept: a snapshot never changes).
func (r *RepoRestorer) Describe(ctx context.Context, id string) (SnapshotInfo, error) {
	m, part, locked, err := r.load(ctx, id)
	info := SnapshotInfo{ProfileLocked: locked}
	if err != nil {
		return info, err
	}
	if part != nil {
		for _, t := range part.Trees {
			info.Profiles = append(info.Profiles, t.Path)
		}
	}
	if c, ok := r.contents.Load(id); ok {
		info.Contents = c.(Contents)
		return info, nil
	}
	var c Contents
	err = snapshot.Walk(ctx, r.Repo, m.Root.Subtree, "", func(p string, n *snapshot.Node) error {
		switch n.Type {
		case snapshot.TypeHardlink:
			c.HardLinks.add(p)
		case snapshot.TypeFIFO:
			c.Fifos.add(p)
		case snapshot.TypeSocket, snapshot.TypeDevice:
			c.Skipped.add(p)
		}
		if len(n.Xattrs) > 0 {
			c.Xattrs.add(p)
		}
		return nil
	})
	if err != nil {
		return info, fmt.Errorf("checkpoint %s: reading its trees: %w", short(id), err)
	}
	r.contents.Store(id, c)
	info.Contents = c
	return info, nil
}

// Check implements Restorer. The manifest is read from storage, not from
// the objects the repository keeps, so damage since it was first read is
// seen.
func (r *RepoRestorer) Check(ctx context.Context, id string) error {
	if bid, err := blob.ParseID(id); err == nil {
		r.Repo.Unkeep(crypt.KindSnapshot, bid)
	}
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
	o := restore.Options{Target: dir, Workers: r.Workers}
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
	res, err := restore.Run(ctx, r.Repo, m, o)
	info.Files, info.Bytes = res.Files, res.Bytes
	return info, err
}
