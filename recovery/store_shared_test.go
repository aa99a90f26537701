package recovery

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/prune"
	"lifeboat/recovery/pgstate"
	"lifeboat/recovery/statedb"
)

// onPostgres runs fn as a "postgres" subtest: its envs open one shared
// PostgreSQL database (testStoreURL).
func onPostgres(t *testing.T, fn func(t *testing.T)) { t.Run("postgres", fn) }

// freezeAt approves bot1's recovery from checkpoint on e and returns once
// its driver reached point, frozen there (as by SIGSTOP) until wake is
// called (at the latest when the test ends).
func (e *renv) freezeAt(point, checkpoint string) (op Operation, wake func()) {
	e.t.Helper()
	reached, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	wake = func() { once.Do(func() { close(resume) }) }
	e.t.Cleanup(wake)
	e.svc.hooks.step = func(_ Operation, at string) error {
		if at == point {
			close(reached)
			<-resume
		}
		return nil
	}
	op = e.approve(checkpoint, "k")
	<-reached
	return op, wake
}

// second is another server on e's database, repository, provider and
// (unless clock is given) clock, with its own state directory.
func (e *renv) second(clock *fakeClock) *renv {
	e.t.Helper()
	b := &renv{t: e.t, ctx: e.ctx, clock: e.clock, p: e.p, r: e.r, repoDir: e.repoDir, stateDir: e.t.TempDir(),
		restorer: e.restorer, capturer: e.capturer}
	if clock != nil {
		b.clock = clock
	}
	b.open()
	e.t.Cleanup(b.close)
	return b
}

// The database itself refuses a second active operation of a workspace
// and a second operation for one idempotency key, whatever the code
// above it does.
func TestSharedStoreConstraints(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		s, err := openTestStore(t, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		put := func(op Operation) error {
			return s.updateTx(func(tx stateTx) error { return putOp(tx, &op) })
		}
		if err := put(Operation{ID: "op-1", Workspace: "w", IdempotencyKey: "k1", State: OpCreating}); err != nil {
			t.Fatal(err)
		}
		if err := put(Operation{ID: "op-2", Workspace: "w", IdempotencyKey: "k2", State: OpApproved}); !errors.Is(err, statedb.ErrConflict) {
			t.Fatalf("second active operation of a workspace: %v", err)
		}
		if err := put(Operation{ID: "op-3", Workspace: "v", IdempotencyKey: "k1", State: OpApproved}); !errors.Is(err, statedb.ErrConflict) {
			t.Fatalf("second operation for one idempotency key: %v", err)
		}
		if err := put(Operation{ID: "op-1", Workspace: "w", IdempotencyKey: "k1", State: OpFailed}); err != nil {
			t.Fatal(err)
		}
		if err := put(Operation{ID: "op-2", Workspace: "w", IdempotencyKey: "k2", State: OpApproved}); err != nil {
			t.Fatalf("a new operation once the first ended: %v", err)
		}
	})
}

// A database migrated by a newer lifeboat is refused with ErrStoreNewer
// (exit 14), and nothing is changed.
func TestSharedStoreNewerSchema(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		s, err := openTestStore(t, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		id := s.ID()
		if err := s.db.(*pgstate.DB).SetSchema(context.Background(), pgstate.Schema+1); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		if _, err := openTestStore(t, t.TempDir()); !errors.Is(err, ErrStoreNewer) {
			t.Fatalf("newer schema: %v", err)
		}
		if id == "" {
			t.Fatal("no store id")
		}
	})
}

// Two servers update one workspace at once, each checking its generation
// in the writing transaction: exactly one moves it on.
func TestSharedFencingInTransaction(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a, err := openTestStore(t, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := openTestStore(t, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := a.AddWorkspace(Workspace{ID: "w", Provider: "local", Instance: "i0"}); err != nil {
			t.Fatal(err)
		}
		// Both read generation 0 before either writes.
		var read sync.WaitGroup
		read.Add(2)
		var once [2]sync.Once
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, s := range []*Store{a, b} {
			wg.Go(func() {
				errs[i] = s.update("w", func(_ stateTx, w *Workspace) error {
					once[i].Do(func() { read.Done(); read.Wait() })
					if w.Generation != 0 {
						return ErrStaleGeneration
					}
					w.Generation, w.Instance = 1, providers.InstanceID("from-"+s.Owner())
					return nil
				})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, ErrStaleGeneration):
				t.Fatalf("unexpected: %v", err)
			}
		}
		w, _ := b.Workspace("w")
		if ok != 1 || w.Generation != 1 {
			t.Fatalf("%d writers won, generation %d (errors %v)", ok, w.Generation, errs)
		}
	})
}

// Captures of one workspace never run at once across servers: the
// workspace's lock is held by one server, and an in-flight marker of a
// capture another live server runs is not taken for a dead process's.
func TestSharedCaptureLease(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		release := a.markHeld(1)
		b := a.second(nil) // its lifecycle opens while a holds the lease
		if _, _, err := b.store.db.Lock(a.ctx, workspaceLockName("bot1"), false); !errors.Is(err, statedb.ErrLocked) {
			t.Fatalf("second server took the workspace lock while the first held it: %v", err)
		}
		if w, _ := b.store.Workspace("bot1"); w.InFlight == nil || w.Failures != 0 {
			t.Fatalf("the live capture's marker was taken for a dead one: %+v", w)
		}
		// b's capture waits for a's lease, then runs.
		got := make(chan Receipt, 1)
		go func() { got <- b.lc.Capture(b.ctx, "bot1", ReasonPark) }()
		select {
		case r := <-got:
			t.Fatalf("capture ran while the other server held the lease: %+v", r)
		default:
		}
		if err := a.store.update("bot1", func(_ stateTx, w *Workspace) error { w.InFlight = nil; return nil }); err != nil {
			t.Fatal(err)
		}
		release()
		if r := <-got; r.Outcome != Captured {
			t.Fatalf("capture after the lease was released: %+v", r)
		}
	})
}

// Approvals with one idempotency key on two servers at once make one
// operation; another key is refused while it runs; one server drives it
// (the other finds its lease held), and the other server's clients see
// its events.
func TestSharedApproveOnce(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		cp := a.capture()
		b := a.second(nil)
		events, stop := b.svc.Subscribe()
		defer stop()
		a.lose()
		ids := make([]string, 8)
		var wg sync.WaitGroup
		for i := range ids {
			e := a
			if i%2 == 1 {
				e = b
			}
			wg.Go(func() {
				op, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "same-key")
				if err != nil {
					t.Error(err)
				}
				ids[i] = op.ID
			})
		}
		wg.Wait()
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("one key, several operations: %v", ids)
			}
		}
		if _, err := b.svc.Approve(b.ctx, "bot1", cp.Snapshot, "other-key"); !errors.Is(err, ErrRecovering) && !errors.Is(err, ErrNotLost) {
			t.Fatalf("second key while the first runs (or after it ended): %v", err)
		}
		// Whichever server drives it, b's subscribers see it end.
		for e := range events {
			if e.Kind == EventOperation && e.Operation == ids[0] && e.OpState.Terminal() {
				if e.OpState != OpRecovered {
					t.Fatalf("operation ended %s", e.OpState)
				}
				break
			}
		}
		a.wait(ids[0])
		b.wait(ids[0])
		ops, err := a.store.Operations("bot1")
		if err != nil || len(ops) != 1 || ops[0].State != OpRecovered {
			t.Fatalf("operations: %+v %v", ops, err)
		}
		if got := a.instances(); len(got) != 1 || got[0] != string(ops[0].Replacement) {
			t.Fatalf("instances: %v, replacement %s", got, ops[0].Replacement)
		}
	})
}

// A server that stops renewing its lease (frozen, as by SIGSTOP) loses
// the operation it drove: another server claims it once the lease lapsed
// and finishes it, and the frozen server's next write is refused in its
// transaction.
func TestSharedOperationTakeover(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		cp := a.capture()
		a.lose()
		// Frozen: a's clock stands still, so it renews nothing.
		op, wake := a.freezeAt("before:creating", cp.Snapshot)
		b := a.second(newFakeClock()) // its own clock: time passes for b only
		b.svc.resume(false)
		if got := b.wait(op.ID); got.State.Terminal() || got.State != OpCreating {
			t.Fatalf("b drove an operation a holds: %+v", got)
		}
		b.clock.Advance(a.clock.Now().Sub(b.clock.Now()) + b.svc.cfg.LeaseTTL + time.Second)
		b.svc.resume(true)
		done := b.wait(op.ID)
		if done.State != OpRecovered {
			t.Fatalf("after the takeover: %+v", done)
		}
		wake() // a wakes up and writes: refused
		if got := a.wait(op.ID); got.State != OpRecovered || got.Replacement != done.Replacement {
			t.Fatalf("a's stale driver changed the operation: %+v", got)
		}
		if got := a.instances(); len(got) != 1 || got[0] != string(done.Replacement) {
			t.Fatalf("instances: %v", got)
		}
		w, _ := a.store.Workspace("bot1")
		if w.Generation != 1 || w.Instance != done.Replacement {
			t.Fatalf("workspace: %+v", w)
		}
	})
}

// A change one server makes reaches the other server's subscribers (the
// events table and NOTIFY), in order, and a server does not get its own
// events twice.
func TestSharedEvents(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		b := a.second(nil)
		fromA, stopA := a.svc.Subscribe()
		defer stopA()
		fromB, stopB := b.svc.Subscribe()
		defer stopB()
		a.capture()
		a.lose() // a's check publishes the health change
		if e := <-fromB; e.Kind != EventHealth || e.Workspace != "bot1" || e.State != HealthLost {
			t.Fatalf("b's subscriber got %+v", e)
		}
		if e := <-fromA; e.Kind != EventHealth || e.State != HealthLost {
			t.Fatalf("a's subscriber got %+v", e)
		}
		// b's own change (the instance came back): once on b, once on a.
		writeFiles(t, a.dir("bot1"), botFiles)
		if _, err := b.svc.Check(b.ctx, "bot1"); err != nil {
			t.Fatal(err)
		}
		if e := <-fromB; e.Kind != EventHealth || e.State != HealthOK {
			t.Fatalf("b's subscriber got %+v", e)
		}
		if e := <-fromA; e.Kind != EventHealth || e.State != HealthOK {
			t.Fatalf("a's subscriber got %+v", e)
		}
		select {
		case e := <-fromB:
			t.Fatalf("b got an event twice or one more: %+v", e)
		default:
		}
	})
}

// A periodic capture that waited for the workspace while another server
// captured it is not taken again: when that capture began after this one
// was asked for (its checkpoint holds every change this one would have),
// or when it began before but the record's fingerprint matches the files
// (it captured these very files).
func TestSharedPeriodicAfterOtherServersCapture(t *testing.T) {
	for _, tc := range []struct {
		name    string
		promote func(a *renv, asked time.Time, cp *Checkpoint, w *Workspace) error
	}{
		{"begun after this one was asked for", func(a *renv, _ time.Time, cp *Checkpoint, w *Workspace) error {
			a.clock.Advance(time.Second)
			cp.Time, cp.Reason = a.clock.Now(), ReasonPark
			w.LastGood = cp
			return nil
		}},
		{"begun before, of the same files", func(a *renv, asked time.Time, cp *Checkpoint, w *Workspace) error {
			fp, err := fingerprint(a.store.db.Salt(), a.dir("bot1"), nil)
			cp.Time, cp.Reason = asked.Add(-time.Second), ReasonPeriodic
			w.LastGood, w.Fingerprint = cp, fp
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onPostgres(t, func(t *testing.T) {
				a := newREnv(t, botFiles)
				first := a.capture()
				b := a.second(nil)
				writeFiles(t, a.dir("bot1"), map[string]string{"notes.txt": "changed after the checkpoint"})
				release, err := a.lc.lease(a.ctx, "bot1") // a's capture runs
				if err != nil {
					t.Fatal(err)
				}
				waiting := make(chan struct{})
				b.lc.hooks.semWait = func(string) { close(waiting) }
				got := make(chan []Receipt, 1)
				asked := a.clock.Now()
				go func() { got <- b.lc.Tick(b.ctx) }()
				<-waiting // b's capture was asked for, and waits for the workspace
				if err := a.store.update("bot1", func(tx stateTx, w *Workspace) error {
					cp := &Checkpoint{Snapshot: first.Snapshot}
					if err := tc.promote(a, asked, cp, w); err != nil {
						return err
					}
					return putCheckpoint(tx, w.ID, cp)
				}); err != nil {
					t.Fatal(err)
				}
				release()
				rs := <-got
				if len(rs) != 1 || rs[0].Outcome != Unchanged || rs[0].LastGood != first.Snapshot {
					t.Fatalf("b's periodic round: %+v", rs)
				}
				if hist, _ := a.store.Checkpoints("bot1"); len(hist) != 2 {
					t.Fatalf("checkpoints: %d, want the two recorded", len(hist))
				}
			})
		})
	}
}

// hookHolds calls after once a hold is written.
type hookHolds struct {
	Holder
	after func(HoldSet)
}

func (h hookHolds) Hold(ctx context.Context, hs HoldSet) error {
	if err := h.Holder.Hold(ctx, hs); err != nil {
		return err
	}
	h.after(hs)
	return nil
}

// A server that writes a workspace's hold while another promotes a
// checkpoint of it waits for the promotion to commit, and then holds the
// new checkpoint: a hold written from the record as it was before the
// commit would replace the one that held the checkpoint being promoted
// (both servers write pins of one owner), and a crash of the promoting
// server before its next hold write would leave the last good checkpoint
// unheld.
func TestSharedHoldWaitsForPromotion(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		a.capture()
		b := a.second(nil)
		writeFiles(t, a.dir("bot1"), map[string]string{"notes.txt": "changed after the first checkpoint"})
		bWaits, bDone := make(chan struct{}), make(chan struct{})
		var once sync.Once
		a.lc.cfg.Holds = hookHolds{Holder: a.lc.cfg.Holds, after: func(hs HoldSet) {
			promoting := false
			for _, why := range hs.Snapshots {
				promoting = promoting || why == "being promoted to the last good checkpoint"
			}
			if !promoting {
				return
			}
			once.Do(func() {
				if unlock, _, err := b.store.db.Lock(b.ctx, holdLockName("bot1"), false); !errors.Is(err, statedb.ErrLocked) {
					t.Errorf("between a's promotion hold and its commit, b took the workspace's hold lock: %v", err)
					if err == nil {
						unlock()
					}
				}
				b.lc.hooks.holdWait = func(string) { close(bWaits) }
				go func() { defer close(bDone); b.lc.SyncHold(b.ctx, "bot1") }()
				<-bWaits // b's hold write has begun: it waits for the hold lock a holds
			})
		}}
		second := a.capture()
		<-bDone
		own := b.lc.cfg.Holds.(*RepoHolds).pins["bot1"]
		if len(own) != 1 || len(own[0].Snapshots) != 1 || own[0].Snapshots[0].ID.String() != second.LastGood {
			t.Fatalf("b's hold after a promoted %s: %+v, want that checkpoint alone", second.LastGood, own)
		}
		pins, err := prune.LoadPins(a.ctx, a.r)
		if err != nil {
			t.Fatal(err)
		}
		if _, held := pins.Held("bot1", own[0].Snapshots[0].ID); !held || len(pins.Objects) != 1 {
			t.Fatalf("pins after the promotion: %+v, want one holding %s", pins.Objects, second.LastGood)
		}
	})
}

// The scheduled pass over every workspace's hold does not wait for a
// hold lock another server holds (a server paused while it held one
// keeps it until it runs again): it leaves that hold to the lock's holder
// and goes on, so the scheduled check behind it (which takes lapsed
// operations over) is not stopped.
func TestSharedSyncHoldsPassesTakenHoldLock(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		a.capture()
		b := a.second(nil)
		unlock, err := b.lc.lockHold(b.ctx, "bot1", true) // b pauses here, holding it
		if err != nil {
			t.Fatal(err)
		}
		defer unlock()
		ctx, cancel := context.WithTimeout(a.ctx, holdLockWait/2)
		defer cancel()
		if err := a.lc.SyncHolds(ctx); err != nil {
			t.Fatalf("SyncHolds beside a taken hold lock: %v", err)
		}
	})
}
