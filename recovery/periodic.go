package recovery

import (
	"cmp"
	"context"
	"sync"
	"time"

	"lifeboat/providers"
)

// NotRunning: a periodic round skipped a workspace that is not running.
const NotRunning Outcome = "not_running"

// Run captures running workspaces until ctx ends or the Lifecycle is
// closed: each workspace is looked at every periodic interval (its own, or
// the default PeriodicInterval), counted from when Run started or from its
// last round.
func (l *Lifecycle) Run(ctx context.Context) error {
	last := map[string]time.Time{}
	start := l.clock.Now()
	for {
		wait := l.untilDue(last, start)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.base.Done():
			return nil
		case <-l.kick:
		case <-l.clock.After(wait):
			l.tickDue(ctx, last, start)
		}
	}
}

// untilDue is how long until the next workspace's periodic round is due.
func (l *Lifecycle) untilDue(last map[string]time.Time, start time.Time) time.Duration {
	wss, err := l.store.Workspaces()
	if err != nil || len(wss) == 0 {
		return l.cfg.PeriodicInterval
	}
	now := l.clock.Now()
	wait := time.Duration(-1)
	for _, w := range wss {
		_, every := l.settings(w)
		d := max(cmp.Or(last[w.ID], start).Add(every).Sub(now), 0)
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return wait
}

// tickDue is one round over the workspaces whose periodic round is due.
func (l *Lifecycle) tickDue(ctx context.Context, last map[string]time.Time, start time.Time) {
	wss, err := l.store.Workspaces()
	if err != nil {
		l.log.Error("periodic round: reading workspaces", "err", err)
		return
	}
	l.fps.keep(wss)
	now := l.clock.Now()
	var due []Workspace
	for _, w := range wss {
		if _, every := l.settings(w); !now.Before(cmp.Or(last[w.ID], start).Add(every)) {
			due = append(due, w)
			last[w.ID] = now
		}
	}
	l.round(ctx, due)
}

// wake makes Run look at the workspaces' intervals again (one was added or
// changed).
func (l *Lifecycle) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
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
	l.fps.keep(wss)
	return l.round(ctx, wss)
}

// round is the periodic decision for each of wss, in parallel.
func (l *Lifecycle) round(ctx context.Context, wss []Workspace) []Receipt {
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
	decided := func(o Outcome, err error) Receipt {
		if err != nil {
			r.fail(o, err)
		} else {
			r.Outcome = o
		}
		r.Finished = l.clock.Now()
		l.emit(r)
		return r
	}
	p, err := l.provider(w)
	if err == nil {
		var st providers.Status
		if st, err = p.Inspect(ctx, w.Instance); err == nil && st.State != providers.Running {
			return decided(NotRunning, nil)
		}
	}
	var same bool
	if err == nil {
		same, r.Listed, err = l.sameFingerprint(ctx, w, p)
	}
	switch {
	case err != nil:
		return decided(Failed, err)
	case same:
		return decided(Unchanged, nil)
	}
	return l.join(ctx, w.ID, ReasonPeriodic, nil)
}
