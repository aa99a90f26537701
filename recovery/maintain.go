package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// Maintenance is the repository upkeep `lifeboat serve` runs on its prune
// schedule (and on request): forget by policy, then prune. It holds no
// lock between runs; each step takes its own, so captures go on beside it
// and wait only during prune's delete phase. One run at a time.
type Maintenance struct {
	Repo *repo.Repository
	// Default is the retention policy of workspaces with no stored one;
	// nil leaves them alone.
	Default   *prune.Policy
	MaxUnused float64
	// DeleteAfter is the two-phase prune's margin (PruneOptions).
	DeleteAfter time.Duration
	Now         func() time.Time
	// Lock are the options of every lock taken (Wait, Command).
	Lock repo.LockOptions
	// Observe, when set, is told of every run (metrics).
	Observe func(MaintenanceReport, error)
	Logger  *slog.Logger

	mu sync.Mutex
}

// MaintenanceReport says what a run did.
type MaintenanceReport struct {
	Started   time.Time     `json:"started"`
	Seconds   float64       `json:"seconds"`
	Kept      int           `json:"snapshots_kept"`
	Forgotten int           `json:"snapshots_forgotten"`
	Warnings  []string      `json:"warnings"`
	Unmanaged []string      `json:"unmanaged"` // workspaces without a policy, left alone
	Prune     prune.Stats   `json:"prune"`
	Damaged   []string      `json:"damaged,omitempty"` // snapshots prune found damaged
	Plan      *pruneSummary `json:"plan,omitempty"`
}

type pruneSummary struct {
	Snapshots   int    `json:"snapshots"`
	Packs       int    `json:"packs"`
	UnusedBytes uint64 `json:"unused_bytes"`
	BytesFreed  uint64 `json:"bytes_freed"`
}

// Maintain runs forget by policy, then prune, now.
func (m *Maintenance) Maintain(ctx context.Context) (MaintenanceReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rep := MaintenanceReport{Started: time.Now().UTC(), Warnings: []string{}, Unmanaged: []string{}}
	err := m.maintain(ctx, &rep)
	rep.Seconds = time.Since(rep.Started).Seconds()
	if m.Observe != nil {
		m.Observe(rep, err)
	}
	return rep, err
}

func (m *Maintenance) maintain(ctx context.Context, rep *MaintenanceReport) error {
	lo := m.Lock
	lo.Command = "serve: forget"
	err := m.Repo.Locked(ctx, repo.LockShared, lo, func(l *repo.Lock) error {
		res, err := Forget(ctx, m.Repo, ForgetOptions{Default: m.Default, Lock: l, Exclusive: m.Lock})
		rep.Kept, rep.Forgotten, rep.Unmanaged = res.Kept, res.Removed, append(rep.Unmanaged, res.Unmanaged...)
		rep.Warnings = append(rep.Warnings, res.Warnings...)
		if errors.Is(err, ErrNoPolicy) {
			return nil // nothing has a policy: nothing to forget
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	lo.Command = "serve: prune"
	err = m.Repo.WithLock(ctx, repo.LockPrune, lo, func(l *repo.Lock) error {
		st, err := RunPrune(ctx, m.Repo, l, PruneOptions{MaxUnused: m.MaxUnused, Lock: m.Lock, DeleteAfter: m.DeleteAfter, Now: m.Now, Plan: func(p *prune.Plan) {
			rep.Plan = &pruneSummary{Snapshots: p.Snapshots, Packs: p.Packs, UnusedBytes: p.UnusedBytes, BytesFreed: p.BytesFreed}
			for _, d := range p.Damaged {
				rep.Damaged = append(rep.Damaged, d.ID.String()+": "+d.Error)
			}
		}})
		rep.Prune = st
		return err
	})
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	return nil
}

// Run calls Maintain every interval (on clk) until ctx ends; a failed run
// is logged and the next one comes at its time.
func (m *Maintenance) Run(ctx context.Context, every time.Duration, clk Clock) error {
	if clk == nil {
		clk = SystemClock{}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(every):
			if _, err := m.Maintain(ctx); err != nil && ctx.Err() == nil && m.Logger != nil {
				m.Logger.Error("scheduled forget and prune failed; the next run comes at its time", "err", err)
			}
		}
	}
}
