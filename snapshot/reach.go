package snapshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/repo"
)

// PruneSource is prune.Source over a repository's snapshots: it lists
// them and walks what each reaches (Reach). checkpoint.RunPrune hands it
// to prune, which does not import this package.
type PruneSource struct{ Repo *repo.Repository }

// Snapshots lists the ids of every stored snapshot.
func (s PruneSource) Snapshots(ctx context.Context) ([]blob.ID, error) {
	var ids []blob.ID
	err := s.Repo.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error { ids = append(ids, id); return nil })
	return ids, err
}

// Reach is Reach over s.Repo.
func (s PruneSource) Reach(ctx context.Context, id blob.ID, m repo.Marker) error {
	return Reach(ctx, s.Repo, id, m)
}

// Reach loads snapshot id and reports to m every blob it reaches: its tree
// blobs and their file chunks, both levels, each tree read at most once
// across calls that share m. Trees are loaded ahead of the walk, a batch
// at a time (TreesAhead), but for those m has seen; what waits for the
// walk stays within WalkAheadBounds. A snapshot that is gone (forgotten
// since the caller listed it) reaches nothing and is not an error. A
// manifest or tree that is missing or damaged fails with an error
// wrapping repo.ErrDamaged that names the snapshot.
func Reach(ctx context.Context, r *repo.Repository, id blob.ID, m repo.Marker) error {
	man, err := LoadManifest(ctx, r, id)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, backend.ErrNotFound) {
			return nil // forgotten since it was listed: it needs nothing
		}
		return fmt.Errorf("%w: %w", repo.ErrDamaged, err)
	}
	// The loaders ahead of the walk ask m which trees were seen.
	sm := &repo.LockedMarker{M: m}
	err = reachTier(ctx, r, blob.Workspace, [][]blob.ID{man.Root.Subtree}, sm)
	if err == nil {
		err = reachSensitive(ctx, r, man, sm)
	}
	if err != nil {
		if ctx.Err() != nil || !damage(err) {
			return fmt.Errorf("snapshot %s: %w", id.Short(), err)
		}
		return fmt.Errorf("%w: snapshot %s: %w", repo.ErrDamaged, id.Short(), err)
	}
	return nil
}

// reachSensitive marks a snapshot's sensitive part and its profile trees,
// when the key in use has the sensitive tier. Without it nothing is
// marked: the caller must then leave sensitive packs alone (prune only
// touches the tiers it was told every snapshot reports).
func reachSensitive(ctx context.Context, r *repo.Repository, man *Manifest, m *repo.LockedMarker) error {
	if man.Sensitive == nil || !slices.Contains(r.Tiers(), blob.Sensitive) {
		return nil
	}
	part, err := LoadSensitivePart(ctx, r, man)
	if err != nil {
		if ctx.Err() == nil && !damage(err) {
			err = treeError{err} // does not decode: damage, like a bad tree
		}
		return err
	}
	if err := m.Add(blob.Sensitive, blob.Tree, *man.Sensitive); err != nil {
		return err
	}
	roots := make([][]blob.ID, len(part.Trees))
	for i, tr := range part.Trees {
		roots[i] = tr.Root.Subtree
	}
	return reachTier(ctx, r, blob.Sensitive, roots, m)
}

// damage reports errors that mean a tree is missing or bad, as opposed to
// the storage failing.
func damage(err error) bool {
	var te treeError
	return errors.As(err, &te) || errors.Is(err, repo.ErrBlobNotFound) || errors.Is(err, repo.ErrPackMissing) || errors.Is(err, repo.ErrCorrupt)
}

type treeError struct{ err error }

func (e treeError) Error() string { return e.err.Error() }
func (e treeError) Unwrap() error { return e.err }

// reachTier walks the directories of tier whose tree blobs are roots, with
// the trees m has not seen loaded ahead, on past damage; it returns the
// first damage found.
func reachTier(ctx context.Context, r *repo.Repository, t blob.Tier, roots [][]blob.ID, m *repo.LockedMarker) error {
	ahead := NewTreesAhead(ctx, r, t, WalkAheadBounds, func(id blob.ID) bool {
		seen, err := m.Seen(t, id)
		return err != nil || !seen // an error is the walk's to report
	})
	defer ahead.Stop()
	var damaged error
	for _, subtree := range roots {
		err := reachDir(ctx, ahead, t, subtree, m)
		if err != nil && (ctx.Err() != nil || !damage(err)) {
			return err
		}
		damaged = cmp.Or(damaged, err)
	}
	return damaged
}

// reachDir walks on past damage, so everything still readable is marked
// even when the snapshot is damaged, and returns the first damage found.
func reachDir(ctx context.Context, ahead *TreesAhead, tier blob.Tier, subtree []blob.ID, m *repo.LockedMarker) error {
	var damaged error
	for _, tid := range subtree {
		seen, err := m.Seen(tier, tid)
		if err != nil {
			return err
		}
		if seen {
			ahead.Forget([]blob.ID{tid})
			continue
		}
		t, err := ahead.Load(ctx, tid)
		if err != nil {
			err = fmt.Errorf("tree %s: %w", tid.Short(), err)
			if bad := (*BadTreeError)(nil); errors.As(err, &bad) {
				err = treeError{err}
			}
			if ctx.Err() != nil || !damage(err) {
				return err
			}
			damaged = cmp.Or(damaged, err)
			continue
		}
		if err := m.Add(tier, blob.Tree, tid); err != nil {
			return err
		}
		for i := range t.Nodes {
			n := &t.Nodes[i]
			for _, c := range n.Content {
				if err := m.Add(tier, blob.Data, c); err != nil {
					return err
				}
			}
			if n.Type == TypeDir {
				err := reachDir(ctx, ahead, tier, n.Subtree, m)
				if err != nil && (ctx.Err() != nil || !damage(err)) {
					return err
				}
				damaged = cmp.Or(damaged, err)
			}
		}
	}
	return damaged
}
