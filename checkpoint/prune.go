package checkpoint

import (
	"context"
	"time"

	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

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
	src := snapshot.PruneSource{Repo: r}
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
