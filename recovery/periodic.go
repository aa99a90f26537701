package recovery

import (
	"context"
	"sync"

	"lifeboat/providers"
)

// NotRunning: a periodic round skipped a workspace that is not running.
const NotRunning Outcome = "not_running"

// Run captures running workspaces every PeriodicInterval until ctx ends
// or the Lifecycle is closed.
func (l *Lifecycle) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.base.Done():
			return nil
		case <-l.clock.After(l.cfg.PeriodicInterval):
			l.Tick(ctx)
		}
	}
}

// Tick is one periodic round: every running workspace whose files changed
// since its last good checkpoint is captured (in parallel, up to
// MaxParallel); the others get an Unchanged or NotRunning receipt.
func (l *Lifecycle) Tick(ctx context.Context) []Receipt {
	wss, err := l.store.Workspaces()
	if err != nil {
		l.log.Error("periodic round: reading workspaces", "err", err)
		return nil
	}
	out := make([]Receipt, len(wss))
	var wg sync.WaitGroup
	for i, w := range wss {
		wg.Go(func() { out[i] = l.periodic(ctx, w) })
	}
	wg.Wait()
	return out
}

func (l *Lifecycle) periodic(ctx context.Context, w Workspace) Receipt {
	now := l.clock.Now()
	r := Receipt{Workspace: w.ID, Reason: ReasonPeriodic, Started: now, Finished: now}
	if w.LastGood != nil {
		r.LastGood = w.LastGood.Snapshot
	}
	p, err := l.provider(w)
	if err == nil {
		var st providers.Status
		if st, err = p.Inspect(ctx, w.Instance); err == nil && st.State != providers.Running {
			r.Outcome = NotRunning
			l.emit(r)
			return r
		}
	}
	var same bool
	if err == nil {
		same, err = l.sameFingerprint(ctx, w, p)
	}
	switch {
	case err != nil:
		r.fail(Failed, err)
		l.emit(r)
		return r
	case same:
		r.Outcome = Unchanged
		l.emit(r)
		return r
	}
	return l.join(ctx, w.ID, ReasonPeriodic, nil)
}
