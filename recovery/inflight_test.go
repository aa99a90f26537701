package recovery

import (
	"errors"
	"fmt"
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

// gatedCapture starts a manual capture of bot1 in e whose capturer waits,
// once started, until gate closes (or its context ends), and returns when
// it has started; got gives its receipt. e's later captures go through
// the same capturer.
func (e *renv) gatedCapture() (gate chan struct{}, got <-chan Receipt) {
	e.t.Helper()
	sc := &scripted{inner: e.capturer, started: make(chan int, 1), gate: make(chan struct{})}
	e.capturer = sc
	e.reopen()
	ch := make(chan Receipt, 1)
	go func() { ch <- e.lc.Capture(e.ctx, "bot1", ReasonManual) }()
	<-sc.started
	return sc.gate, ch
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
		gate, got := e.gatedCapture()
		e.svc.CheckDue(e.ctx)
		if w, _ := e.store.Workspace("bot1"); w.InFlight == nil || len(w.Recovery) != 0 {
			t.Fatalf("the running capture's mark was taken for a dead one: %+v", w)
		}
		close(gate)
		if r := <-got; r.Outcome != Captured {
			t.Fatalf("capture: %+v", r)
		}
		if w, _ := e.store.Workspace("bot1"); w.InFlight != nil || len(w.Recovery) != 0 {
			t.Fatalf("after the capture: %+v", w)
		}
	})
}

// A capture promotes only while its in-flight mark is its own: when the
// mark was replaced while it ran (as another server does once this one's
// lock in the state store was lost: it records the mark as interrupted,
// then captures with its own), the capture fails with ErrMarkLost, the
// last good checkpoint stays, and the other capture's mark is left.
func TestCaptureNotPromotedWithoutItsMark(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		good := e.capture()
		gate, got := e.gatedCapture()
		other := &InFlight{Started: e.clock.Now(), Reason: ReasonPeriodic, PID: 4242, ID: "another-servers"}
		if err := e.store.update("bot1", func(_ stateTx, w *Workspace) error {
			e.lc.interrupted(w)
			w.InFlight = other
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		close(gate)
		r := <-got
		if r.Outcome != Failed || !errors.Is(r.Err, ErrMarkLost) || r.Snapshot == "" || !r.Retryable {
			t.Fatalf("the capture whose mark was replaced: %+v", r)
		}
		w, err := e.store.Workspace("bot1")
		if err != nil {
			t.Fatal(err)
		}
		if w.LastGood == nil || w.LastGood.Snapshot != good.Snapshot || w.InFlight == nil || *w.InFlight != *other {
			t.Fatalf("last good %+v (want %s), in flight %+v (want the other capture's)", w.LastGood, good.Snapshot, w.InFlight)
		}
		if w.Failures != 1 { // counted once, when the mark was recorded as interrupted
			t.Fatalf("failures %d, want 1", w.Failures)
		}
		if n := len(w.Recovery); n != 2 || w.Recovery[0].Outcome != Interrupted || w.Recovery[1].Outcome != Failed ||
			!strings.Contains(w.Recovery[1].Error, ErrMarkLost.Error()) {
			t.Fatalf("records: %+v", w.Recovery)
		}
	})
}

// A capture whose lock in the state store ends while it runs (its
// database session ends, as when the connection drops) stops within a
// few seconds, fails saying so (retryable), clears its mark and promotes
// nothing; the next capture takes the lock again and succeeds.
func TestSharedCaptureStopsWhenLockLost(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		gate, got := e.gatedCapture()
		if n := pgtest.EndLockSessions(t, testStoreURL(t)); n != 1 {
			t.Fatalf("%d sessions held advisory locks, want the one of the capture", n)
		}
		r := <-got // the gate stays shut: the capture stops by itself
		if r.Outcome != Failed || !errors.Is(r.Err, ErrLockLost) || !r.Retryable || !strings.Contains(r.Error, "bot1") {
			t.Fatalf("the capture that lost its lock: %+v", r)
		}
		w, err := e.store.Workspace("bot1")
		if err != nil {
			t.Fatal(err)
		}
		if w.LastGood != nil || w.InFlight != nil || w.Failures != 1 || len(w.Recovery) != 1 || !strings.Contains(w.Recovery[0].Error, ErrLockLost.Error()) {
			t.Fatalf("after the capture that lost its lock: %+v", w)
		}
		close(gate)
		e.capture()
	})
}
