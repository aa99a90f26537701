package recovery

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"lifeboat/checkpoint"
	"lifeboat/providers"
	"lifeboat/prune"
)

// Workspaces are registered, changed and removed while the lifecycle
// runs; each refusal names what is wrong.
func TestWorkspaceManagement(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, func(c *Config) { c.ParkInterval = 10 * time.Minute })
		ctx := context.Background()
		e.prov.instance(t, "i2", map[string]string{"x.txt": "x"})

		if _, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "ws2", Provider: "nowhere", Instance: "i2"}); !errors.Is(err, ErrUnknownProvider) {
			t.Fatalf("unknown provider: %v", err)
		}
		if _, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "ws2", Provider: "fake", Instance: "absent"}); !errors.Is(err, ErrInstanceMissing) {
			t.Fatalf("missing instance: %v", err)
		}
		if _, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "../x", Provider: "fake", Instance: "i2"}); !errors.Is(err, ErrBadWorkspaceID) {
			t.Fatalf("bad id: %v", err)
		}
		w, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "ws2", Provider: "fake", Instance: "i2", Settings: Settings{ParkInterval: time.Minute}})
		if err != nil || w.Generation != 0 || w.Settings.ParkInterval != time.Minute {
			t.Fatalf("add: %+v %v", w, err)
		}
		if _, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "ws2", Provider: "fake", Instance: "i2"}); !errors.Is(err, ErrWorkspaceExists) {
			t.Fatalf("second add: %v", err)
		}
		// The id is checked before the instance: one taken is refused as
		// such whatever the instance named (here one that does not exist).
		if _, err := e.l.AddWorkspace(ctx, NewWorkspace{ID: "ws2", Provider: "fake", Instance: "absent"}); !errors.Is(err, ErrWorkspaceExists) {
			t.Fatalf("second add naming a missing instance: %v", err)
		}

		// Its own park interval (1 min) applies, not the default (10 min).
		e.want(e.l.Park(ctx, "ws2"), Captured)
		e.clock.Advance(2 * time.Minute)
		e.want(e.l.Park(ctx, "ws2"), Captured)
		e.want(e.l.Park(ctx, "ws1"), Captured)
		e.clock.Advance(2 * time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Throttled)
		if park, _ := e.l.Intervals(e.ws("ws1")); park != 10*time.Minute {
			t.Fatalf("ws1 park interval %s", park)
		}

		// A new instance after a normal wake moves the generation and forgets
		// what was learnt about the old one.
		e.prov.instance(t, "i3", map[string]string{"x.txt": "woken"})
		inst := providers.InstanceID("i3")
		zero := time.Duration(0)
		w, err = e.l.ChangeWorkspace(ctx, "ws2", WorkspaceChange{Instance: &inst, ParkInterval: &zero})
		if err != nil || w.Instance != "i3" || w.Generation != 1 || w.Fingerprint != nil || w.Settings.ParkInterval != 0 {
			t.Fatalf("change: %+v %v", w, err)
		}
		gone := providers.InstanceID("gone")
		if _, err := e.l.ChangeWorkspace(ctx, "ws2", WorkspaceChange{Instance: &gone}); !errors.Is(err, ErrInstanceMissing) {
			t.Fatalf("change to a missing instance: %v", err)
		}
		neg := -time.Minute
		if _, err := e.l.ChangeWorkspace(ctx, "ws2", WorkspaceChange{PeriodicInterval: &neg}); err == nil {
			t.Fatal("negative interval accepted")
		}
		r := e.l.Capture(ctx, "ws2", ReasonManual)
		if e.want(r, Captured); e.ws("ws2").LastGood.Instance != "i3" {
			t.Fatalf("capture after the wake: %+v", e.ws("ws2").LastGood)
		}

		// Refused while a recovery operation runs.
		if err := e.store.update("ws2", func(_ stateTx, w *Workspace) error { w.Operation = "op-x"; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.ChangeWorkspace(ctx, "ws2", WorkspaceChange{Instance: &inst}); err != nil {
			t.Fatalf("the same instance is not a change: %v", err)
		}
		other := providers.InstanceID("i2")
		if _, err := e.l.ChangeWorkspace(ctx, "ws2", WorkspaceChange{Instance: &other}); !errors.Is(err, ErrRecovering) {
			t.Fatalf("change while recovering: %v", err)
		}
		if _, err := e.l.RemoveWorkspace(ctx, "ws2", false); !errors.Is(err, ErrRecovering) {
			t.Fatalf("remove while recovering: %v", err)
		}
		if err := e.store.update("ws2", func(_ stateTx, w *Workspace) error { w.Operation = ""; return nil }); err != nil {
			t.Fatal(err)
		}

		// Removed: the store forgets it, its snapshots stay.
		res, err := e.l.RemoveWorkspace(ctx, "ws2", false)
		if err != nil || res.Forgotten != 0 {
			t.Fatalf("remove: %+v %v", res, err)
		}
		if _, err := e.store.Workspace("ws2"); !errors.Is(err, ErrUnknownWorkspace) {
			t.Fatalf("removed workspace still there: %v", err)
		}
		if cps, _ := e.store.Checkpoints("ws2"); len(cps) != 0 {
			t.Fatalf("history kept: %d", len(cps))
		}
		if n := countSnapshots(t, e.r, "ws2"); n != 3 {
			t.Fatalf("%d snapshots of the removed workspace, want its 3", n)
		}
	})
}

// The lifecycle holds each workspace's last good checkpoint in the
// repository, so a forget in any process keeps it even when a newer
// snapshot of the same workspace id exists; removing a workspace with
// forget removes its snapshots and its hold.
func TestLastGoodHeldInRepository(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, func(c *Config) {})
		ctx := context.Background()
		l2, err := New(Config{Store: e.store, Capturer: e.cap, Providers: []providers.Provider{e.prov}, Clock: e.clock,
			Holds: &RepoHolds{Repo: e.r, Now: e.clock.Now}})
		if err != nil {
			t.Fatal(err)
		}
		e.l.Close()
		e.l = l2
		defer l2.Close()
		good := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(good, Captured)
		pins, err := prune.LoadPins(ctx, e.r)
		if err != nil {
			t.Fatal(err)
		}
		if why, held := pins.Held("ws1", mustID(t, good.Snapshot)); !held || why == "" {
			t.Fatalf("last good %s not held: %+v", good.Snapshot, pins)
		}
		// The same workspace id captured from another path, later: newer.
		other := t.TempDir()
		writeFiles(t, other, map[string]string{"elsewhere.txt": "z"})
		e.clock.Advance(time.Minute)
		if _, err := (&RepoCapturer{Repo: e.r}).Capture(ctx, CaptureRequest{Workspace: Workspace{ID: "ws1", Instance: "i1"}, Dir: other, Reason: ReasonManual}); err != nil {
			t.Fatal(err)
		}
		res, err := checkpoint.Forget(ctx, e.r, checkpoint.ForgetOptions{Workspace: "ws1", Policy: &prune.Policy{Last: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Removed != 0 || countSnapshots(t, e.r, "ws1") != 2 {
			t.Fatalf("forget --keep-last 1 removed the held last good checkpoint: %+v", res)
		}
		// A newer last good moves the hold: the older one is released.
		e.clock.Advance(time.Minute)
		newer := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(newer, Captured)
		if pins, _ = prune.LoadPins(ctx, e.r); len(pins.Objects) != 1 {
			t.Fatalf("%d pin objects after a promotion, want 1", len(pins.Objects))
		}
		if _, held := pins.Held("ws1", mustID(t, good.Snapshot)); held {
			t.Fatal("the older checkpoint is still held")
		}
		if _, err := checkpoint.Forget(ctx, e.r, checkpoint.ForgetOptions{Workspace: "ws1", Policy: &prune.Policy{Last: 1}}); err != nil {
			t.Fatal(err)
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 1 {
			t.Fatalf("%d snapshots after forget, want only the held last good one", n)
		}
		// Removed with forget: no snapshot and no hold stays.
		res2, err := e.l.RemoveWorkspace(ctx, "ws1", true)
		if err != nil || res2.Forgotten != 1 {
			t.Fatalf("remove with forget: %+v %v", res2, err)
		}
		if pins, _ = prune.LoadPins(ctx, e.r); len(pins.Objects) != 0 || countSnapshots(t, e.r, "ws1") != 0 {
			t.Fatalf("after remove: pins %+v, %d snapshots", pins.Objects, countSnapshots(t, e.r, "ws1"))
		}
	})
}

// Run looks at each workspace on its own periodic interval.
func TestPeriodicPerWorkspaceInterval(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		receipts := make(chan Receipt, 16)
		e := newEnv(t, false, true, func(c *Config) {
			c.PeriodicInterval = 10 * time.Minute
			c.Overrides = map[string]Settings{"ws1": {PeriodicInterval: 4 * time.Minute}}
			c.OnReceipt = func(r Receipt) { receipts <- r }
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.l.Run(ctx) }()
		e.clock.WaitFor(t, 4*time.Minute)
		e.clock.Advance(4 * time.Minute)
		if r := <-receipts; r.Workspace != "ws1" || r.Outcome != Captured {
			t.Fatalf("first round: %+v", r)
		}
		// The workspace's own setting (through the API) wins over the config's.
		two := 2 * time.Minute
		if _, err := e.l.ChangeWorkspace(ctx, "ws1", WorkspaceChange{PeriodicInterval: &two}); err != nil {
			t.Fatal(err)
		}
		e.clock.WaitFor(t, 2*time.Minute)
		e.clock.Advance(2 * time.Minute)
		if r := <-receipts; r.Workspace != "ws1" || r.Outcome != Unchanged {
			t.Fatalf("second round: %+v", r)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	})
}

// A stopped (paused) instance is rolled back directly to its native
// checkpoint; the rolled-back instance is then the native checkpoint's.
func TestRestartStoppedInstance(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, map[string]string{"a.txt": "before"})
		r := e.capture()
		if r.Native == "" {
			t.Fatalf("no native checkpoint taken: %+v", r)
		}
		writeFiles(t, e.dir("bot1"), map[string]string{"a.txt": "damaged"})
		if err := e.p.Stop(e.ctx, "bot1"); err != nil {
			t.Fatal(err)
		}
		if st, err := e.p.Inspect(e.ctx, "bot1"); err != nil || st.State != providers.Stopped {
			t.Fatalf("inspect after stop: %+v %v", st, err)
		}
		rr, err := e.lc.Restart(e.ctx, "bot1")
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(e.dir(rr.To), "a.txt")); got != "before" {
			t.Fatalf("rolled back a.txt = %q", got)
		}
		// A second restart rolls the new instance back to the same checkpoint.
		if _, err := e.lc.Restart(e.ctx, "bot1"); err != nil {
			t.Fatalf("second restart: %v", err)
		}
	})
}
