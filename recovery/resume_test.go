package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/backend"
	backendlocal "lifeboat/backend/local"
	"lifeboat/internal/repotest"
	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery/dirlock"
	"lifeboat/repo"
)

// TestResumeAtEveryStep stops the operation at every point of the state
// machine, as a crash of the server would (nothing more is written), then
// reopens the store and the service and resumes: each run ends recovered,
// on one replacement (an interrupted Create is found again by its key),
// with the workspace id unchanged and one new generation.
func TestResumeAtEveryStep(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		for _, point := range append([]string{"before:approved"}, stepPoints...) {
			t.Run(point, func(t *testing.T) {
				e, cp := newLostREnv(t)
				e.svc.hooks.step = func(_ Operation, at string) error {
					if at == point {
						return errHookStop
					}
					return nil
				}
				op := e.approve(cp.Snapshot, "key")
				stopped := e.wait(op.ID)
				if stopped.State.Terminal() {
					t.Fatalf("stopped at %s but ended %s", point, stopped.State)
				}
				if err := e.svc.Guard("bot1"); !errors.Is(err, ErrRecovering) {
					t.Fatalf("bot use after the crash: %v", err)
				}
				// The restart, checked before the resumed driver can end.
				e.close()
				e.open()
				if err := e.svc.Guard("bot1"); !errors.Is(err, ErrRecovering) {
					t.Fatalf("bot use after the restart, before the end: %v", err)
				}
				e.svc.Resume(e.ctx)
				done := e.wait(op.ID)
				if done.State != OpRecovered {
					t.Fatalf("after resume: %+v", done)
				}
				w, err := e.store.Workspace("bot1")
				if err != nil || w.ID != "bot1" || w.Instance != done.Replacement || w.Generation != 1 || w.Operation != "" || w.LastGood.Snapshot != cp.Snapshot {
					t.Fatalf("workspace: %+v %v", w, err)
				}
				if got := e.instances(); !slices.Equal(got, []string{string(done.Replacement)}) {
					t.Fatalf("instances: %v", got)
				}
				for name, body := range botFiles {
					if got := readFile(t, filepath.Join(e.dir(done.Replacement), name)); got != body {
						t.Fatalf("%s: %q", name, got)
					}
				}
				if _, err := os.Stat(done.LocalTree); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("local staging tree left: %v", err)
				}
			})
		}
	})
}

// damagePacks flips every byte of every pack file of the
// repository at dir and returns a function that puts them back.
func damagePacks(t *testing.T, dir string) (undo func()) {
	t.Helper()
	saved := map[string][]byte{}
	err := filepath.WalkDir(filepath.Join(dir, string(backend.Pack)), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		saved[p] = b
		bad := slices.Clone(b)
		for i := range bad {
			bad[i] ^= 0x5a
		}
		return os.WriteFile(p, bad, 0o644)
	})
	if err != nil || len(saved) == 0 {
		t.Fatalf("damaging packs: %v (%d files)", err, len(saved))
	}
	return func() {
		for p, b := range saved {
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBadCheckpointRollsBack: a checkpoint whose packs are damaged does
// not restore; the operation ends failed through rolling_back, the
// replacement is destroyed, the last good checkpoint is kept and the
// workspace stays lost, ready for another approval, which succeeds once
// the data is repaired.
func TestBadCheckpointRollsBack(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		undo := damagePacks(t, e.repoDir)
		// A fresh handle with an empty cache: the capture's handle holds
		// the data it wrote in its cache, which is good data.
		be, err := backendlocal.Open(e.repoDir)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := repo.Open(e.ctx, be, repotest.Password, repo.Options{CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer fresh.Close(e.ctx)
		e.restorer = &RepoRestorer{Repo: fresh}
		e.reopen()
		op := e.approve(cp.Snapshot, "k1")
		op = e.wait(op.ID)
		var states []OpState
		for _, tr := range op.History {
			states = append(states, tr.State)
		}
		if op.State != OpFailed || !slices.Contains(states, OpRollingBack) || !strings.Contains(op.Error, cp.Snapshot) {
			t.Fatalf("operation: %+v", op)
		}
		if got := e.instances(); len(got) != 0 {
			t.Fatalf("replacement not destroyed: %v", got)
		}
		w, _ := e.store.Workspace("bot1")
		if w.LastGood.Snapshot != cp.Snapshot || w.Health.State != HealthLost || w.Operation != "" || w.Instance != "bot1" || w.Generation != 0 {
			t.Fatalf("workspace after the failure: %+v", w)
		}
		if _, err := os.Stat(op.LocalTree); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("local tree of the failed restore left: %v", err)
		}
		undo()
		op2 := e.approve(cp.Snapshot, "k2")
		if op2 = e.wait(op2.ID); op2.State != OpRecovered || op2.Replacement == op.Replacement {
			t.Fatalf("second attempt: %+v", op2)
		}
	})
}

// TestCopyBackRetriesAndRepairHold: a copy-back failing before writing is
// retried (3 attempts, backoff on the clock); one failing after writing
// started is not, keeps the replacement and the restored tree, and records
// a repair hold with the failed operation. The hold survives a restart and
// a new recovery, and only an operator's resolution clears it.
func TestCopyBackRetriesAndRepairHold(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		calls := 0
		e.p.writeFiles = func(id providers.InstanceID, src string) (string, error, bool) {
			calls++
			if calls <= 2 {
				return "", &providers.Error{Provider: "local", Op: "write files", Kind: providers.KindUnavailable}, true
			}
			return "", nil, false
		}
		op := e.approve(cp.Snapshot, "retry")
		e.clock.WaitFor(t, 250*time.Millisecond)
		e.clock.Advance(250 * time.Millisecond)
		e.clock.WaitFor(t, 500*time.Millisecond)
		e.clock.Advance(500 * time.Millisecond)
		if op = e.wait(op.ID); op.State != OpRecovered || calls != 3 {
			t.Fatalf("after two failures before writing: %+v, %d calls", op, calls)
		}

		// Lose the replacement too, and fail the copy-back after writing.
		if err := e.p.Destroy(e.ctx, op.Replacement); err != nil {
			t.Fatal(err)
		}
		if h, _ := e.svc.Check(e.ctx, "bot1"); h.State != HealthLost {
			t.Fatalf("health: %+v", h)
		}
		calls = 0
		e.p.writeFiles = func(providers.InstanceID, string) (string, error, bool) {
			calls++
			return "", fmt.Errorf("disk full half-way: %w", dirlock.ErrWriteStarted), true
		}
		op2 := e.approve(cp.Snapshot, "hold")
		op2 = e.wait(op2.ID)
		if op2.State != OpFailed || op2.Hold == "" || calls != 1 {
			t.Fatalf("failed copy-back: %+v (%d calls)", op2, calls)
		}
		holds, err := e.svc.RepairHolds()
		if err != nil || len(holds) != 1 {
			t.Fatalf("holds: %+v %v", holds, err)
		}
		h := holds[0]
		if h.ID != op2.Hold || h.Replacement != op2.Replacement || h.Lost != op.Replacement || h.Class != dirlock.AfterWrite || h.Workspace != "bot1" {
			t.Fatalf("hold: %+v", h)
		}
		if _, err := os.Stat(e.dir(h.Replacement)); err != nil {
			t.Fatalf("held replacement destroyed: %v", err)
		}
		if _, err := os.Stat(h.Source); err != nil {
			t.Fatalf("held source tree removed: %v", err)
		}
		// The held replacement was stopped, and that is recorded and seen
		// at the provider; the failed operation says what to do.
		if h.Stop == nil || !h.Stop.Stopped {
			t.Fatalf("held replacement not stopped: %+v", h.Stop)
		}
		al, err := e.svc.Allocation(e.ctx, h.ID)
		if err != nil || al.State != providers.Stopped || al.Instance != h.Replacement || al.Provider != local.Name || al.Stop == nil {
			t.Fatalf("allocation: %+v %v", al, err)
		}
		if !strings.Contains(op2.Action, h.ID) || !strings.Contains(op2.Action, "resolve") {
			t.Fatalf("action of the held failure: %q", op2.Action)
		}

		// A restart and a new, successful recovery keep the hold.
		e.p.writeFiles = nil
		e.reopen()
		op3 := e.approve(cp.Snapshot, "after-hold")
		if op3 = e.wait(op3.ID); op3.State != OpRecovered {
			t.Fatalf("recovery after the hold: %+v", op3)
		}
		if holds, _ := e.svc.RepairHolds(); len(holds) != 1 || holds[0].ID != h.ID {
			t.Fatalf("hold after restart and recovery: %+v", holds)
		}
		if _, err := os.Stat(h.Source); err != nil {
			t.Fatalf("held source tree removed after restart and recovery: %v", err)
		}
		if _, err := os.Stat(e.dir(h.Replacement)); err != nil {
			t.Fatalf("held replacement destroyed: %v", err)
		}
		st, _ := e.svc.State("bot1")
		if len(st.Holds) != 1 {
			t.Fatalf("state lists holds %+v", st.Holds)
		}

		// Only an operator resolution, with outcome and evidence, clears it.
		if _, err := e.svc.ResolveHold(h.ID, "gone", "x"); err == nil {
			t.Fatal("unknown outcome accepted")
		}
		if _, err := e.svc.ResolveHold(h.ID, HoldDestroyed, ""); err == nil {
			t.Fatal("resolution without evidence accepted")
		}
		if _, err := e.svc.ResolveHold("hold-nope", HoldDestroyed, "x"); !errors.Is(err, ErrUnknownHold) {
			t.Fatalf("unknown hold: %v", err)
		}
		got, err := e.svc.ResolveHold(h.ID, HoldDestroyed, "destroyed "+string(h.Replacement)+" by hand, ticket OPS-1")
		if err != nil || got.Resolution == nil || got.Resolution.Outcome != HoldDestroyed {
			t.Fatalf("resolve: %+v %v", got, err)
		}
		if _, err := e.svc.ResolveHold(h.ID, HoldKept, "again"); !errors.Is(err, ErrHoldResolved) {
			t.Fatalf("second resolution: %v", err)
		}
		if holds, _ := e.svc.RepairHolds(); len(holds) != 0 {
			t.Fatalf("holds after resolution: %+v", holds)
		}
		all, _ := e.svc.AllHolds()
		if len(all) != 1 || all[0].Resolution.Evidence == "" {
			t.Fatalf("resolved hold not kept as a record: %+v", all)
		}
	})
}

// TestBusyTargetWaits: a step that finds its target's directory-merge lock
// held by someone else waits (the error names the holder) and goes on,
// on the schedule, once the lock is free.
func TestBusyTargetWaits(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		e.close()
		other, err := dirlock.New(e.stateDir, dirlock.Options{Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		var held *dirlock.Lock
		e.hooks.step = func(op Operation, at string) error {
			if at == "before:restoring" && held == nil {
				lk, lerr := other.TryLock(op.LocalTree, "test holder")
				if lerr != nil {
					return lerr
				}
				held = lk
			}
			return nil
		}
		e.open()
		e.svc.cfg.LockWait = -1 // one attempt: the fake clock does not move
		e.svc.locks, err = dirlock.New(e.stateDir, dirlock.Options{Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		op := e.approve(cp.Snapshot, "k")
		op = e.wait(op.ID)
		if op.State != OpRestoring || !strings.Contains(op.LastError, "test holder") || !op.RetryAt.Equal(e.clock.Now().Add(time.Minute)) {
			t.Fatalf("while the target is locked: %+v", op)
		}
		if err := held.Unlock(); err != nil {
			t.Fatal(err)
		}
		e.svc.CheckDue(e.ctx) // not due yet
		if op = e.wait(op.ID); op.State != OpRestoring {
			t.Fatalf("resumed before its retry time: %+v", op)
		}
		e.clock.Advance(time.Minute)
		e.svc.CheckDue(e.ctx)
		if op = e.wait(op.ID); op.State != OpRecovered || op.LastError != "" {
			t.Fatalf("after the lock was freed: %+v", op)
		}
	})
}
