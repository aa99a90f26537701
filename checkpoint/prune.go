package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"time"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// PruneSource lets prune (which may not import snapshot/) list a
// repository's snapshots and walk what they reach.
type PruneSource struct{ Repo *repo.Repository }

// Snapshots implements prune.Source.
func (s PruneSource) Snapshots(ctx context.Context) ([]blob.ID, error) {
	var ids []blob.ID
	err := s.Repo.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error { ids = append(ids, id); return nil })
	return ids, err
}

// Reach implements prune.Source.
func (s PruneSource) Reach(ctx context.Context, id blob.ID, m prune.Marker) error {
	err := snapshot.Reach(ctx, s.Repo, id, m)
	if errors.Is(err, snapshot.ErrDamaged) {
		return fmt.Errorf("%w: %w", prune.ErrDamaged, err)
	}
	return err
}

// PruneOptions say how RunPrune prunes.
type PruneOptions struct {
	MaxUnused     float64
	ForgetDamaged bool
	DryRun        bool
	// Lock are the options of the exclusive lock of the delete phase; its
	// owner is set to the prune lock's, so the two do not conflict.
	Lock repo.LockOptions
	// Plan, when set, is shown the plan before it is carried out.
	Plan func(*prune.Plan)
	// DeleteAfter, when above zero, makes the prune two-phase: no
	// exclusive lock, captures go on beside it, and packs are deleted
	// only DeleteAfter after they were condemned (prune.Options). Zero
	// deletes at once under the exclusive lock (only when nothing captures).
	DeleteAfter time.Duration
	// Now is the two-phase prune's clock; default time.Now.
	Now func() time.Time
}

// RunPrune plans a prune of r and, unless DryRun, carries it out. The
// caller holds l, a prune lock (a shared one for a dry run): captures go
// on while prune plans and repacks; only the delete phase takes the
// exclusive lock.
func RunPrune(ctx context.Context, r *repo.Repository, l *repo.Lock, o PruneOptions) (prune.Stats, error) {
	src := PruneSource{r}
	p, err := prune.PlanPrune(ctx, r, src, prune.Options{MaxUnused: o.MaxUnused, ForgetDamaged: o.ForgetDamaged, Tiers: r.Tiers(),
		DeleteAfter: o.DeleteAfter, Now: o.Now})
	if p != nil {
		defer p.Close()
		if o.Plan != nil {
			o.Plan(p)
		}
	}
	if err != nil || o.DryRun {
		return prune.Stats{}, err
	}
	lo := o.Lock
	lo.Owner = l.Owner()
	if o.DeleteAfter > 0 {
		return p.Execute(ctx, r, src, prune.ExecOptions{ForgetDamaged: o.ForgetDamaged, Held: l})
	}
	return p.Execute(ctx, r, src, prune.ExecOptions{ForgetDamaged: o.ForgetDamaged,
		Lock: func(ctx context.Context) (*repo.Lock, error) { return r.Lock(ctx, repo.LockExclusive, lo) }})
}
