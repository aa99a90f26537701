package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"lifeboat/recovery/statedb"
)

// A capture marks its workspace in flight (Workspace.InFlight) once it
// holds the workspace's lease, and clears the mark before it lets the
// lease go. So a mark whose workspace lease nobody holds was left by a
// capture whose process died: on a shared store, its server's database
// connection, and the workspace lock with it, ended with the process.
// Such a mark is turned into an interrupted recovery record, once (the
// record is written and the mark cleared in one transaction), by whoever
// finds it first: a lifecycle that opens (New), a scheduled check
// (Service.CheckDue), or the next capture of the workspace.

var pid = os.Getpid()

// markInFlight marks the capture rec of ws in flight; the caller holds
// ws's lease. A mark found there is a dead capture's, recorded as
// interrupted first.
func (l *Lifecycle) markInFlight(ws string, rec *Receipt) error {
	var dead *InFlight
	id := randomHex(8)
	err := l.store.update(ws, func(_ stateTx, w *Workspace) error {
		dead = l.interrupted(w)
		w.InFlight = &InFlight{Started: rec.Started, Reason: rec.Reason, PID: pid, ID: id}
		return nil
	})
	l.logInterrupted(ws, dead, err)
	if err == nil {
		rec.mark = id
	}
	return err
}

// interruptStale records as interrupted the in-flight mark of every
// workspace whose lease no capture holds, in this process or (on a shared
// store) on any server. A paused server's connections stay open, so the
// marks of its captures stay until it resumes or dies.
func (l *Lifecycle) interruptStale(ctx context.Context) error {
	wss, err := l.store.Workspaces()
	if err != nil {
		return err
	}
	var errs []error
	for _, w := range wss {
		if w.InFlight == nil {
			continue
		}
		release, err := l.tryLease(ctx, w.ID)
		if errors.Is(err, statedb.ErrLocked) {
			continue // a capture of it runs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var dead *InFlight
		err = l.store.update(w.ID, func(_ stateTx, w *Workspace) error { dead = l.interrupted(w); return nil })
		release()
		l.logInterrupted(w.ID, dead, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: recording its interrupted capture: %w", w.ID, err))
		}
	}
	return errors.Join(errs...)
}

// tryLease takes ws's lease if no one holds it, else fails with
// statedb.ErrLocked at once.
func (l *Lifecycle) tryLease(ctx context.Context, ws string) (release func(), err error) {
	local := l.localLock(ws)
	select {
	case local <- struct{}{}:
	default:
		return nil, statedb.ErrLocked
	}
	unlock, _, err := l.store.db.Lock(ctx, workspaceLockName(ws), false)
	if err != nil {
		<-local
		return nil, err
	}
	return func() { unlock(); <-local }, nil
}

// interrupted turns w's in-flight mark, which no capture holds, into an
// interrupted recovery record, and returns the mark (nil: w has none).
func (l *Lifecycle) interrupted(w *Workspace) *InFlight {
	f := w.InFlight
	if f == nil {
		return nil
	}
	w.InFlight = nil
	w.Failures++
	w.addRecord(RecoveryRecord{Time: l.clock.Now(), Reason: f.Reason, Attempt: w.Failures, Outcome: Interrupted,
		Error: fmt.Sprintf("%v (started %s by process %d)", ErrInterrupted, f.Started.UTC().Format(time.RFC3339), f.PID)})
	return f
}

// logInterrupted logs the mark f of ws recorded as interrupted, once the
// transaction that recorded it committed (err nil).
func (l *Lifecycle) logInterrupted(ws string, f *InFlight, err error) {
	if f != nil && err == nil {
		l.log.Warn("a capture's process ended before it finished; recorded as interrupted", "workspace", ws,
			"started", f.Started, "reason", f.Reason, "pid", f.PID)
	}
}
