package recovery

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"

	"lifeboat/profile"
	"lifeboat/providers"
)

// ErrFenced: the workspace moved to another instance while a capture of
// the old one ran; the capture is not promoted.
var ErrFenced = errors.New("workspace generation changed during the capture")

// ErrMarkLost: a capture's in-flight mark is no longer its own, so it is
// not promoted. On a shared store its lock in the state store ended with
// its database session (a dropped connection) while it ran, and another
// server recorded it interrupted, and may have captured since.
var ErrMarkLost = errors.New("the capture's in-flight mark is gone: its lock in the state store was lost while it ran (the database session ended), and another server recorded it as interrupted")

// run is one capture of ws under its lease: quiesce, capture, verify,
// promote, native checkpoint, resume, retention.
func (l *Lifecycle) run(ctx context.Context, ws string, rec *Receipt) {
	release, err := l.localLease(ctx, ws)
	if err != nil {
		rec.fail(Cancelled, err)
		return
	}
	defer release()
	if l.hooks.semWait != nil {
		l.hooks.semWait(ws)
	}
	select {
	case l.sem <- struct{}{}:
		defer func() { <-l.sem }()
	case <-ctx.Done():
		rec.fail(Cancelled, ctx.Err())
		return
	}
	// Among servers, after the semaphore: a capture waiting for its turn
	// holds no database connection.
	shared, lost, err := l.sharedLease(ctx, ws)
	if err != nil {
		o := Failed
		if ctx.Err() != nil {
			o = Cancelled
		}
		rec.fail(o, err)
		return
	}
	defer shared()
	ctx, stop := stopOnLost(ctx, ws, lost)
	defer stop()
	w, err := l.store.Workspace(ws)
	if err != nil {
		rec.fail(Failed, err)
		return
	}
	if w.LastGood != nil {
		rec.LastGood = w.LastGood.Snapshot
	}
	if l.store.Shared() && rec.Reason == ReasonPeriodic && w.LastGood != nil && w.LastGood.Time.After(rec.Started) {
		// Another server's capture, started after this round asked for
		// one, was promoted while this one waited for the workspace: it
		// holds every change this one would have captured.
		rec.Outcome = Unchanged
		return
	}
	if err := captureFence(w); err != nil {
		rec.fail(Refused, err) // not a failed capture: nothing was tried
		return
	}
	p, err := l.provider(w)
	if err != nil {
		l.failed(ctx, ws, rec, Failed, err)
		return
	}
	if err := l.checkProfiles(ctx, w, p); err != nil {
		rec.fail(Refused, err) // nothing was tried: the workspace is as it was
		return
	}
	if ctx.Err() != nil { // the lock lost, or the server stopping, before the capture began
		rec.fail(stopped(ctx, Cancelled, ctx.Err()))
		return
	}
	if err := l.markInFlight(ws, rec); err != nil {
		rec.fail(Failed, err)
		return
	}
	if !l.captureQuiesced(ctx, w, p, rec) {
		return
	}
	if l.cfg.Retention != nil {
		if err := l.repoWork(ctx, func() error { return l.cfg.Retention.Apply(ctx, ws, rec.LastGood) }); err != nil {
			rec.RetentionError = err.Error()
			l.log.Error("retention after capture failed", "workspace", ws, "err", l.redact(err.Error()))
		}
	}
}

// captureQuiesced pauses the writers, takes the native checkpoint when it
// is due, captures, promotes, and resumes the writers whatever happens. It
// reports whether a checkpoint was promoted; failures are recorded.
func (l *Lifecycle) captureQuiesced(ctx context.Context, w Workspace, p providers.Provider, rec *Receipt) bool {
	qctx, qcancel := l.clockDeadline(ctx, l.cfg.QuiesceTimeout)
	defer qcancel()
	writers, paused := l.quiesceWriters(w, p)
	called, err := pause(qctx, writers, w, p)
	defer l.resume(ctx, called, w, p)
	if err != nil {
		l.failed(ctx, w.ID, rec, outcomeOf(err), err)
		return false
	}
	rec.Paused = paused
	// The provider's own checkpoint comes first, on its own clock: a
	// portable capture that fails below is retried without another one.
	l.takeNative(ctx, w, p, rec)
	if !p.Capabilities().Files {
		l.nativeOnlyProvider(w, p, rec)
		return false
	}
	files, err := p.ReadFiles(ctx, w.Instance)
	if err != nil {
		l.failed(ctx, w.ID, rec, outcomeOf(err), err)
		return false
	}
	defer files.Close()
	// A capturer that checks every profile it finds for a running
	// browser before it reads it is trusted to: the lifecycle waits only
	// when it reports one, rather than search the workspace for profiles
	// before every capture.
	bc, checks := l.cfg.Capturer.(browserChecker)
	checks = checks && bc.checksBrowsers(w.ID)
	if !checks {
		if err := l.waitBrowsers(qctx, files.Dir()); err != nil {
			l.failed(ctx, w.ID, rec, outcomeOf(err), err)
			return false
		}
	}
	qcancel()
	fingerprint := func() ([]byte, bool) {
		fp, _, err := l.fps.of(w.ID, files.Dir(), l.store.db.Salt(), l.clock.Now())
		if err != nil {
			l.failed(ctx, w.ID, rec, Failed, fmt.Errorf("listing %s: %w", files.Dir(), err))
			return nil, false
		}
		return fp, true
	}
	fp, ok := fingerprint()
	if !ok {
		return false
	}
	if l.store.Shared() && rec.Reason == ReasonPeriodic && w.LastGood != nil && bytes.Equal(fp, w.Fingerprint) {
		// Every server's round asks for the workspaces that changed, so
		// another server may have captured these very files while this
		// one waited for the workspace, in a capture begun before this
		// one was asked for: the record's fingerprint, read after the
		// wait, matches the files.
		rec.Outcome = Unchanged
		if err := l.store.update(w.ID, func(_ stateTx, w *Workspace) error { rec.clearMark(w); return nil }); err != nil {
			l.log.Error("clearing an in-flight capture", "workspace", w.ID, "err", err)
		}
		return false
	}
	procRecs, procs := l.procs.snapshot(w, l.cfg.Redact)
	var res Result
	// No repository lock: a capture is a session (repo.BeginSession) that
	// a two-phase prune beside it respects; see docs/guarantees.md.
	req := CaptureRequest{Workspace: w, Dir: files.Dir(), Reason: rec.Reason, Time: rec.Started}
	res, err = l.cfg.Capturer.Capture(ctx, req)
	if checks && errors.Is(err, profile.ErrBrowserRunning) && ctx.Err() == nil {
		// The capture found a browser running before it read its
		// profile: wait for the browsers as a quiesce step does, with a
		// deadline of its own, then capture again.
		wctx, wcancel := l.clockDeadline(ctx, l.cfg.QuiesceTimeout)
		err = l.waitBrowsers(wctx, files.Dir())
		wcancel()
		if err != nil {
			l.failed(ctx, w.ID, rec, outcomeOf(err), err)
			return false
		}
		if fp, ok = fingerprint(); !ok {
			return false
		}
		res, err = l.cfg.Capturer.Capture(ctx, req)
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // cancelled after the snapshot was written: not promoted
	}
	if err != nil {
		l.failed(ctx, w.ID, rec, outcomeOf(err), err)
		return false
	}
	rec.Snapshot, rec.Files, rec.Bytes, rec.NewBytes, rec.Problems = res.Snapshot, res.Files, res.Bytes, res.NewBytes, res.Problems
	rec.Prefixes = res.Prefixes
	if !res.Complete {
		l.failed(ctx, w.ID, rec, Partial, fmt.Errorf("snapshot %s is partial: %d paths could not be read; the last good checkpoint stays", res.Snapshot, res.Problems))
		return false
	}
	cp := &Checkpoint{Snapshot: res.Snapshot, Time: rec.Started, Reason: rec.Reason, Instance: w.Instance,
		Generation: w.Generation, Files: res.Files, Bytes: res.Bytes, Processes: procRecs}
	// A capture of an instance the workspace has left is not promoted
	// (checked again in the promotion's transaction), nor held.
	promote := func(cur Workspace) error {
		if cur.Generation != w.Generation || cur.Instance != w.Instance {
			return fmt.Errorf("%w (instance %s generation %d -> instance %s generation %d); the capture of the old instance is not promoted",
				ErrFenced, w.Instance, w.Generation, cur.Instance, cur.Generation)
		}
		if !rec.ownsMark(&cur) {
			return ErrMarkLost
		}
		return captureFence(cur)
	}
	if cur, err := l.store.Workspace(w.ID); err != nil || promote(cur) != nil {
		l.failed(ctx, w.ID, rec, Failed, fmt.Errorf("promoting snapshot %s: %w", res.Snapshot, cmp.Or(err, promote(cur))))
		return false
	}
	// The repository holds the new checkpoint before the store names it:
	// from then on no retention anywhere removes it.
	err = l.promoteHeld(ctx, w.ID, res.Snapshot, func() error {
		return l.store.update(w.ID, func(tx stateTx, cur *Workspace) error {
			if err := promote(*cur); err != nil {
				return err
			}
			cur.LastGood, cur.Fingerprint, cur.Failures, cur.InFlight = cp, fp, 0, nil
			w = *cur
			return putCheckpoint(tx, w.ID, cp)
		})
	})
	if err != nil {
		l.failed(ctx, w.ID, rec, Failed, fmt.Errorf("promoting snapshot %s: %w", res.Snapshot, err))
		return false
	}
	l.procs.forget(w.ID, procs)
	rec.Outcome, rec.LastGood = Captured, res.Snapshot
	return true
}

func outcomeOf(err error) Outcome {
	switch {
	case errors.Is(err, ErrQuiesceTimeout):
		return QuiesceTimeout
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	return Failed
}

// stopped is the outcome and error of an attempt: one cancelled because
// the workspace's lock was lost (ctx's cause) fails, saying so.
func stopped(ctx context.Context, o Outcome, err error) (Outcome, error) {
	if cause := context.Cause(ctx); o == Cancelled && errors.Is(cause, ErrLockLost) {
		return Failed, fmt.Errorf("%w (%w)", cause, err)
	}
	return o, err
}

// failed records a failed attempt on the workspace's recovery record and
// clears its in-flight mark (the outcome as stopped says). An attempt
// whose mark another server already recorded as interrupted (and so
// counted) adds its record without counting again.
func (l *Lifecycle) failed(ctx context.Context, ws string, rec *Receipt, o Outcome, err error) {
	o, err = stopped(ctx, o, err)
	rec.fail(o, err)
	uerr := l.store.update(ws, func(_ stateTx, w *Workspace) error {
		if rec.mark == "" || rec.ownsMark(w) {
			w.Failures++
		}
		rec.clearMark(w)
		rec.Attempt = w.Failures
		w.addRecord(RecoveryRecord{Time: l.clock.Now(), Reason: rec.Reason, Attempt: w.Failures, Outcome: o, Error: l.redact(err.Error())})
		return nil
	})
	if uerr != nil {
		l.log.Error("recording a failed capture", "workspace", ws, "err", uerr, "capture_err", l.redact(err.Error()))
	}
}

// nativeOnlyProvider ends the capture of a workspace whose provider has
// no file access (a sessions API with native checkpoints only): the native
// checkpoint above is all there is, so the portable capture is refused,
// saying so, rather than failing at every park and counting as a failure.
func (l *Lifecycle) nativeOnlyProvider(w Workspace, p providers.Provider, rec *Receipt) {
	rec.fail(Refused, fmt.Errorf("workspace %s: provider %s has no file access, so only its native checkpoint is taken (%s); "+
		"no portable checkpoint is kept, and a lost instance cannot be recovered into a replacement", w.ID, w.Provider, p.Name()))
	if err := l.store.update(w.ID, func(_ stateTx, w *Workspace) error { rec.clearMark(w); return nil }); err != nil {
		l.log.Error("clearing an in-flight capture", "workspace", w.ID, "err", err)
	}
}

// Park is called before the server parks workspace ws. It retries pending
// native checkpoint deletes, takes a native checkpoint when one is due (on
// its own clock), then captures unless the last good checkpoint is younger
// than the park interval (Throttled). Whatever the receipt says, the
// server goes on parking: a failure is recorded, and the next park
// captures again.
func (l *Lifecycle) Park(ctx context.Context, ws string) Receipt {
	l.retryPending(ctx, ws)
	if r, ok := l.parkThrottled(ws); ok {
		if r.Outcome == Throttled {
			l.nativeOnly(ctx, ws, &r)
		}
		l.emit(&r)
		return r
	}
	return l.join(ctx, ws, ReasonPark, l.parkThrottled)
}

// parkThrottled answers a park that captures nothing: refused, or inside
// the park interval.
func (l *Lifecycle) parkThrottled(ws string) (Receipt, bool) {
	now := l.clock.Now()
	r := Receipt{Workspace: ws, Reason: ReasonPark, Started: now, Finished: now}
	w, err := l.store.Workspace(ws)
	if err != nil {
		r.fail(Failed, err)
		return r, true
	}
	if w.LastGood != nil {
		r.LastGood = w.LastGood.Snapshot
	}
	if err := captureFence(w); err != nil {
		r.fail(Refused, err)
		return r, true
	}
	park, _ := l.settings(w)
	if w.LastGood != nil && now.Sub(w.LastGood.Time) < park {
		r.Outcome = Throttled
		return r, true
	}
	return r, false
}

// nativeOnly takes the native checkpoint of a throttled park when it is
// due, under the workspace's lease, with the writers paused.
func (l *Lifecycle) nativeOnly(ctx context.Context, ws string, rec *Receipt) {
	w, err := l.store.Workspace(ws)
	if err != nil {
		return
	}
	p, err := l.provider(w)
	if err != nil || !l.nativeDue(w, p) {
		return
	}
	release, err := l.lease(ctx, ws)
	if err != nil {
		return
	}
	defer release()
	if w, err = l.store.Workspace(ws); err != nil || captureFence(w) != nil || !l.nativeDue(w, p) {
		return
	}
	qctx, qcancel := l.clockDeadline(ctx, l.cfg.QuiesceTimeout)
	defer qcancel()
	writers, paused := l.quiesceWriters(w, p)
	called, err := pause(qctx, writers, w, p)
	defer l.resume(ctx, called, w, p)
	rec.Paused = err == nil && paused
	if err != nil {
		rec.NativeError = "native checkpoint not taken: the writers could not be paused: " + err.Error()
		l.recordNative(w.ID, rec, err)
		return
	}
	l.takeNative(ctx, w, p, rec)
	rec.Finished = l.clock.Now()
}

// sameFingerprint reports whether the files of w are unchanged since its
// last good checkpoint, and whether they were listed to tell.
func (l *Lifecycle) sameFingerprint(ctx context.Context, w Workspace, p providers.Provider) (same, listed bool, err error) {
	if w.LastGood == nil || w.Fingerprint == nil {
		return false, false, nil
	}
	files, err := p.ReadFiles(ctx, w.Instance)
	if err != nil {
		return false, false, err
	}
	defer files.Close()
	fp, listed, err := l.fps.of(w.ID, files.Dir(), l.store.db.Salt(), l.clock.Now())
	return err == nil && bytes.Equal(fp, w.Fingerprint), listed, err
}
