package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"lifeboat/blob"
	"lifeboat/checkpoint"
	"lifeboat/prune"
	"lifeboat/repo"
)

// Maintenance is the repository upkeep `lifeboat serve` runs on its prune
// schedule (and on request): forget by policy, then prune; and on its
// retention schedule, when it has one, forget by policy alone. It holds no
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
	// Observe, when set, is told of every run of Maintain (metrics);
	// ObserveRetention of every run of Retain.
	Observe          func(MaintenanceReport, error)
	ObserveRetention func(MaintenanceReport, error)
	Logger           *slog.Logger

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
	return m.run(ctx, m.Observe, func(rep *MaintenanceReport) error {
		if err := m.forget(ctx, rep); err != nil {
			return err
		}
		return m.prune(ctx, rep)
	})
}

// Retain runs forget by policy alone, now: the retention of every
// workspace at once, which `serve` runs on the [retention] schedule
// instead of after each capture (one listing of the repository for all
// of them). Its report has no prune part.
func (m *Maintenance) Retain(ctx context.Context) (MaintenanceReport, error) {
	return m.run(ctx, m.ObserveRetention, func(rep *MaintenanceReport) error { return m.forget(ctx, rep) })
}

// run runs fn, one run at a time, and tells observe of its report.
func (m *Maintenance) run(ctx context.Context, observe func(MaintenanceReport, error), fn func(*MaintenanceReport) error) (MaintenanceReport, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rep := MaintenanceReport{Started: time.Now().UTC(), Warnings: []string{}, Unmanaged: []string{}}
	err := fn(&rep)
	rep.Seconds = time.Since(rep.Started).Seconds()
	if observe != nil {
		observe(rep, err)
	}
	return rep, err
}

// forget applies the retention policies to every workspace: planned
// under a shared lock, removed under an exclusive one after the pins are
// read again (checkpoint.Forget with a lock).
func (m *Maintenance) forget(ctx context.Context, rep *MaintenanceReport) error {
	lo := m.Lock
	lo.Command = "serve: forget"
	err := m.Repo.Locked(ctx, repo.LockShared, lo, func(l *repo.Lock) error {
		res, err := checkpoint.Forget(ctx, m.Repo, checkpoint.ForgetOptions{Default: m.Default, Lock: l, Exclusive: m.Lock})
		rep.Kept, rep.Forgotten, rep.Unmanaged = res.Kept, res.Removed, append(rep.Unmanaged, res.Unmanaged...)
		rep.Warnings = append(rep.Warnings, res.Warnings...)
		if len(res.Gone) > 0 && m.Logger != nil {
			m.Logger.Info("forget: snapshots were already removed by another forget or retention beside this one", "snapshots", shortIDs(res.Gone))
		}
		if errors.Is(err, checkpoint.ErrNoPolicy) {
			return nil // nothing has a policy: nothing to forget
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("forget: %w", err)
	}
	return nil
}

// prune runs a two-phase prune under a prune lock.
func (m *Maintenance) prune(ctx context.Context, rep *MaintenanceReport) error {
	lo := m.Lock
	lo.Command = "serve: prune"
	err := m.Repo.WithLock(ctx, repo.LockPrune, lo, func(l *repo.Lock) error {
		st, err := checkpoint.RunPrune(ctx, m.Repo, l, checkpoint.PruneOptions{MaxUnused: m.MaxUnused, Lock: m.Lock, DeleteAfter: m.DeleteAfter, Now: m.Now, Plan: func(p *prune.Plan) {
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
	return runEvery(ctx, every, clk, func() {
		if _, err := m.Maintain(ctx); err != nil && ctx.Err() == nil && m.Logger != nil {
			m.Logger.Error("scheduled forget and prune failed; the next run comes at its time", "err", err)
		}
	})
}

// RunRetention calls Retain every interval (on clk) until ctx ends; a
// failed run is logged and the next one comes at its time.
func (m *Maintenance) RunRetention(ctx context.Context, every time.Duration, clk Clock) error {
	return runEvery(ctx, every, clk, func() {
		if _, err := m.Retain(ctx); err != nil && ctx.Err() == nil && m.Logger != nil {
			m.Logger.Error("scheduled retention failed; the next run comes at its time", "err", err)
		}
	})
}

func runEvery(ctx context.Context, every time.Duration, clk Clock, fn func()) error {
	if clk == nil {
		clk = SystemClock{}
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-clk.After(every):
			fn()
		}
	}
}

// shortIDs are ids as logs show them.
func shortIDs(ids []blob.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.Short()
	}
	return out
}
