package recovery

import (
	"errors"
	"testing"
)

// TestCaptureOfLostInstanceFenced: a capture that started on the old
// instance before the loss was detected ends after the recovery switched
// the workspace to the replacement; it is not promoted, so the lost
// instance's state never replaces the last good checkpoint.
func TestCaptureOfLostInstanceFenced(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		cp := e.capture()
		gated := &scripted{fail: map[int]error{}, started: make(chan int, 1), gate: make(chan struct{})}
		e.capturer = gated
		e.reopen()
		done := make(chan Receipt, 1)
		go func() { done <- e.lc.Capture(e.ctx, "bot1", ReasonManual) }()
		<-gated.started // the capture has read the old instance and is writing its snapshot
		e.lose()
		op := e.approve(cp.Snapshot, "k")
		if op = e.wait(op.ID); op.State != OpRecovered {
			t.Fatalf("operation: %+v", op)
		}
		close(gated.gate)
		r := <-done
		if r.Outcome != Failed || !errors.Is(r.Err, ErrFenced) {
			t.Fatalf("capture of the lost instance: %+v", r)
		}
		w, _ := e.store.Workspace("bot1")
		if w.LastGood.Snapshot != cp.Snapshot || w.Instance != op.Replacement {
			t.Fatalf("last good replaced by the lost instance's capture: %+v", w)
		}
	})
}

// TestRefusedReceiptsNameTheLastGood: a park and a capture of a lost
// workspace are refused, and their receipts name the last good checkpoint
// the recovery offers.
func TestRefusedReceiptsNameTheLastGood(t *testing.T) {
	e, cp := newLostREnv(t)
	for _, r := range []Receipt{e.lc.Park(e.ctx, "bot1"), e.lc.Capture(e.ctx, "bot1", ReasonManual)} {
		if r.Outcome != Refused || !errors.Is(r.Err, ErrLost) || r.LastGood != cp.Snapshot {
			t.Fatalf("%s of the lost workspace: %+v", r.Reason, r)
		}
	}
}

// TestRestartInterruptedNotRerun: a restart whose lifeboat died while the
// command ran is reported interrupted after the restart, and the same key
// never runs the command again.
func TestRestartInterruptedNotRerun(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		if _, err := e.lc.StartProcess("bot1", []string{"true"}, "."); err != nil {
			t.Fatal(err)
		}
		cp := e.capture()
		e.lose()
		op := e.approve(cp.Snapshot, "k")
		e.wait(op.ID)
		// What a process killed during Exec leaves: the intent, no result.
		w, _ := e.store.Workspace("bot1")
		err := e.store.updateTx(func(tx stateTx) error {
			return putRestart(tx, &ProcessRestart{Key: "r1", Workspace: "bot1", Index: 0, Command: []string{"true"},
				Instance: w.Instance, Generation: w.Generation, State: "running", Started: e.clock.Now()})
		})
		if err != nil {
			t.Fatal(err)
		}
		e.reopen()
		r, err := e.svc.RestartProcess(e.ctx, "bot1", 0, "r1")
		if err != nil || r.State != "interrupted" {
			t.Fatalf("interrupted restart: %+v %v", r, err)
		}
		if _, execs := e.p.count(); execs != 0 {
			t.Fatalf("the command ran again: %d execs", execs)
		}
		if _, err := e.svc.RestartProcess(e.ctx, "bot1", 1, "r2"); err == nil {
			t.Fatal("restart of a process that was not lost accepted")
		}
		if _, err := e.svc.RestartProcess(e.ctx, "bot1", 0, "r1-other"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.RestartProcess(e.ctx, "bot1", 0, "r1"); err != nil {
			t.Fatal(err)
		}
		if _, execs := e.p.count(); execs != 1 {
			t.Fatalf("%d execs, want 1 (one new key)", execs)
		}
	})
}
