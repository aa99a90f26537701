package recovery

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"lifeboat/recovery/statedb/pgtest"
)

// markHeld is a capture of bot1 in flight in e: it holds bot1's lease
// and its in-flight mark names process pid. release is the capture's
// process dying: the lease goes, the mark stays.
func (e *renv) markHeld(pid int) (release func()) {
	e.t.Helper()
	release, err := e.lc.lease(e.ctx, "bot1")
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.update("bot1", func(_ stateTx, w *Workspace) error {
		w.InFlight = &InFlight{Started: e.clock.Now(), Reason: ReasonPeriodic, PID: pid}
		return nil
	}); err != nil {
		release()
		e.t.Fatal(err)
	}
	return release
}

// wantInterrupted checks bot1's recovery records: n in all, the last one
// the interrupted capture of process pid, and no mark left.
func wantInterrupted(e *renv, n, pid int) Workspace {
	e.t.Helper()
	w, err := e.store.Workspace("bot1")
	if err != nil {
		e.t.Fatal(err)
	}
	if w.InFlight != nil || len(w.Recovery) != n {
		e.t.Fatalf("want %d records and no in-flight mark: %+v", n, w)
	}
	if r := w.Recovery[n-1]; r.Outcome != Interrupted || !strings.Contains(r.Error, fmt.Sprintf("process %d", pid)) {
		e.t.Fatalf("last record: %+v", r)
	}
	return w
}

// A server killed mid-capture leaves its in-flight mark in the shared
// store. A server already running records it as interrupted, once: at its
// next scheduled check, or at its next capture of the workspace (which
// replaces the mark); a mark whose capture still runs on another server
// is left alone.
func TestSharedInterruptedByRunningServer(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		b := a.second(nil)

		a.markHeld(4242)() // a server killed mid-capture
		b.svc.CheckDue(b.ctx)
		if w := wantInterrupted(b, 1, 4242); w.Failures != 1 {
			t.Fatalf("failures: %+v", w)
		}
		b.svc.CheckDue(b.ctx)
		wantInterrupted(b, 1, 4242) // once

		// A capture a runs still holds the workspace's lock: its mark stays.
		release := a.markHeld(4343)
		b.svc.CheckDue(b.ctx)
		if w, _ := b.store.Workspace("bot1"); w.InFlight == nil || len(w.Recovery) != 1 {
			t.Fatalf("a live capture's mark was taken for a dead one: %+v", w)
		}
		release() // a dies with its mark in place

		if r := b.lc.Capture(b.ctx, "bot1", ReasonManual); r.Outcome != Captured {
			t.Fatalf("capture: %+v", r)
		}
		if w := wantInterrupted(b, 2, 4343); w.Failures != 0 || w.LastGood == nil {
			t.Fatalf("after the capture that replaced the mark: %+v", w)
		}
	})
}

// A scheduled check leaves the mark of a capture running in its own
// process (or, on a shared store, in another server's).
func TestCheckDueLeavesRunningCapture(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		sc := &scripted{inner: e.capturer, started: make(chan int, 1), gate: make(chan struct{})}
		e.capturer = sc
		e.reopen()
		got := make(chan Receipt, 1)
		go func() { got <- e.lc.Capture(e.ctx, "bot1", ReasonManual) }()
		<-sc.started
		e.svc.CheckDue(e.ctx)
		if w, _ := e.store.Workspace("bot1"); w.InFlight == nil || len(w.Recovery) != 0 {
			t.Fatalf("the running capture's mark was taken for a dead one: %+v", w)
		}
		close(sc.gate)
		if r := <-got; r.Outcome != Captured {
			t.Fatalf("capture: %+v", r)
		}
		if w, _ := e.store.Workspace("bot1"); w.InFlight != nil || len(w.Recovery) != 0 {
			t.Fatalf("after the capture: %+v", w)
		}
	})
}

// A capture whose lock in the state store ends while it runs (its
// database session ends, as when the connection drops) is not promoted:
// another server records it as interrupted and captures the workspace,
// and the older capture then neither replaces that newer checkpoint nor
// clears a mark that is not its own.
func TestSharedCaptureLockLost(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		b := a.second(nil)
		sc := &scripted{inner: a.capturer, started: make(chan int, 1), gate: make(chan struct{})}
		a.capturer = sc
		a.reopen()
		got := make(chan Receipt, 1)
		go func() { got <- a.lc.Capture(a.ctx, "bot1", ReasonManual) }()
		<-sc.started
		if n := pgtest.EndLockSessions(t, testStoreURL(t)); n != 1 {
			t.Fatalf("%d sessions held advisory locks, want the one of a's capture", n)
		}
		b.svc.CheckDue(b.ctx)
		wantInterrupted(b, 1, os.Getpid())
		newer := b.capture()

		close(sc.gate)
		r := <-got
		if r.Outcome != Failed || !errors.Is(r.Err, ErrMarkLost) || r.Snapshot == "" {
			t.Fatalf("the capture that lost its lock: %+v", r)
		}
		w, err := b.store.Workspace("bot1")
		if err != nil {
			t.Fatal(err)
		}
		if w.LastGood == nil || w.LastGood.Snapshot != newer.Snapshot || w.InFlight != nil {
			t.Fatalf("after the capture that lost its lock: last good %+v (want %s), in flight %+v", w.LastGood, newer.Snapshot, w.InFlight)
		}
		if last := w.Recovery[len(w.Recovery)-1]; last.Outcome != Failed || !strings.Contains(last.Error, ErrMarkLost.Error()) {
			t.Fatalf("last record: %+v", last)
		}
	})
}
