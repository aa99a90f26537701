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

// round is the periodic decision for each of wss, in parallel: each is
// checked (its instance inspected, its files mirrored and fingerprinted) in
// one of the lifecycle's MaxChecks check slots; those that changed give
// their slot back and are captured, up to MaxParallel at once.
func (l *Lifecycle) round(ctx context.Context, wss []Workspace) []Receipt {
	out := make([]Receipt, len(wss))
	inSlots(l.check, len(wss), func(i int, release func()) { out[i] = l.periodic(ctx, wss[i], release) })
	return out
}

// inSlots calls fn(i, release) for each i in [0, n), each on a goroutine
// of its own, and returns when all have returned. A call starts only once
// it holds a slot of slots (a send to it), which it gives back by calling
// release once.
func inSlots(slots chan struct{}, n int, fn func(i int, release func())) {
	var wg sync.WaitGroup
	for i := range n {
		slots <- struct{}{}
		var once sync.Once
		wg.Go(func() { fn(i, func() { once.Do(func() { <-slots }) }) })
	}
	wg.Wait()
}

// periodic decides about w and captures it when its files changed; it
// calls checked once, when the check is over and before any capture.
func (l *Lifecycle) periodic(ctx context.Context, w Workspace, checked func()) Receipt {
	now := l.clock.Now()
	r := Receipt{Workspace: w.ID, Reason: ReasonPeriodic, Started: now, Finished: now}
	if w.LastGood != nil {
		r.LastGood = w.LastGood.Snapshot
	}
	running, same, listed, err := l.periodicCheck(ctx, w)
	checked()
	r.Listed = listed
	switch {
	case err != nil:
		r.fail(Failed, err)
	case !running:
		r.Outcome = NotRunning
	case same:
		r.Outcome = Unchanged
	default:
		return l.join(ctx, w.ID, ReasonPeriodic, nil)
	}
	r.Finished = l.clock.Now()
	l.emit(&r)
	return r
}

// periodicCheck asks w's provider whether its instance runs and, if it
// does, whether its files still have the last good checkpoint's
// fingerprint (listed: the files were listed to find out).
func (l *Lifecycle) periodicCheck(ctx context.Context, w Workspace) (running, same, listed bool, err error) {
	p, err := l.provider(w)
	if err != nil {
		return false, false, false, err
	}
	st, err := p.Inspect(ctx, w.Instance)
	if err != nil {
		return false, false, false, err
	}
	if st.State != providers.Running {
		return false, false, false, nil
	}
	same, listed, err = l.sameFingerprint(ctx, w, p)
	return true, same, listed, err
}
