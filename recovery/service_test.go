package recovery

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
	"lifeboat/providers"
)

var botFiles = map[string]string{"notes.md": "remember the milk", "src/main.go": "package main\n", "data/big.txt": strings.Repeat("lifeboat ", 5000)}

// TestRecoverLostSandboxLocal is the acceptance test: files and the
// browser-session fixture are checkpointed, the test sandbox is destroyed,
// the loss is detected and offered, the approval restores into a
// replacement, and the files, the profile state and the unchanged
// workspace id are confirmed; the recorded process is reported lost and
// restarted exactly once for a repeated request.
func TestRecoverLostSandboxLocal(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		fx := localstorage.New(8)
		if err := fx.Write(e.ctx, filepath.Join(e.dir("bot1"), "chrome"), fixture.Options{}); err != nil {
			t.Fatal(err)
		}
		proc, err := e.lc.StartProcess("bot1", []string{"sh", "-c", "echo restarted >> restart.log"}, ".")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = proc.Write([]byte("serving on :8080\n"))
		if h, err := e.svc.Check(e.ctx, "bot1"); err != nil || h.State != HealthOK {
			t.Fatalf("healthy check: %+v %v", h, err)
		}
		cp := e.capture()
		e.clock.Advance(90 * time.Minute)
		e.lose()
		if r := e.lc.Capture(e.ctx, "bot1", ReasonManual); r.Outcome != Refused || !errors.Is(r.Err, ErrLost) {
			t.Fatalf("a capture of the lost instance was not refused: %+v", r)
		}

		offer, err := e.svc.Offer(e.ctx, "bot1")
		if err != nil {
			t.Fatal(err)
		}
		if offer.Checkpoint != cp.Snapshot || !offer.BrowserProfile || !slices.Equal(offer.Profiles, []string{"chrome"}) ||
			offer.Age != 90*time.Minute || len(offer.NotRecoverable) < 3 || len(offer.LostProcesses) != 1 ||
			offer.LostProcesses[0].Tail != "serving on :8080\n" || offer.LostInstance != "bot1" {
			t.Fatalf("offer: %+v", offer)
		}
		events, cancel := e.svc.Subscribe()
		defer cancel()

		op := e.approve(offer.Checkpoint, "approve-1")
		op = e.wait(op.ID)
		if op.State != OpRecovered || op.Replacement == "" || op.Replacement == "bot1" || op.NewGeneration != 1 {
			t.Fatalf("operation: %+v", op)
		}
		var states []OpState
		for _, tr := range op.History {
			states = append(states, tr.State)
		}
		if want := []OpState{OpApproved, OpCreating, OpRestoring, OpValidating, OpSwitching, OpRecovered}; !slices.Equal(states, want) {
			t.Fatalf("history %v, want %v", states, want)
		}
		st, err := e.svc.State("bot1")
		if err != nil {
			t.Fatal(err)
		}
		if st.Workspace != "bot1" || st.Instance != op.Replacement || st.Generation != 1 || st.Health.State != HealthOK || st.Operation.ID != op.ID {
			t.Fatalf("state after recovery: %+v", st)
		}
		for name, body := range botFiles {
			if got := readFile(t, filepath.Join(e.dir(op.Replacement), name)); got != body {
				t.Fatalf("%s restored as %q", name, got)
			}
		}
		if err := fx.Check(e.ctx, filepath.Join(e.dir(op.Replacement), "chrome"), false); err != nil {
			t.Fatalf("browser profile state: %v", err)
		}
		if got := e.instances(); !slices.Equal(got, []string{string(op.Replacement)}) {
			t.Fatalf("instances after recovery: %v", got)
		}
		seen := map[OpState]bool{}
		for len(events) > 0 {
			ev := <-events
			seen[ev.OpState] = true
		}
		if !seen[OpRecovered] || !seen[OpSwitching] {
			t.Fatalf("subscriber saw %v", seen)
		}

		// Lost processes: reported with their last output, restarted once.
		lost, err := e.svc.LostProcesses("bot1")
		if err != nil || len(lost) != 1 || lost[0].State != "lost" || lost[0].Tail != "serving on :8080\n" || lost[0].Restart == "" {
			t.Fatalf("lost processes: %+v %v", lost, err)
		}
		var wg sync.WaitGroup
		recs := make([]ProcessRestart, 4)
		for i := range recs {
			wg.Go(func() {
				var err error
				if recs[i], err = e.svc.RestartProcess(e.ctx, "bot1", 0, "restart-1"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := readFile(t, filepath.Join(e.dir(op.Replacement), "restart.log")); got != "restarted\n" {
			t.Fatalf("the command ran %d times for one key", strings.Count(got, "restarted"))
		}
		for _, r := range recs {
			if r.State != "done" || r.ExitCode != 0 || r.Key != "restart-1" {
				t.Fatalf("restart record: %+v", r)
			}
		}
		e.reopen()
		if r, err := e.svc.RestartProcess(e.ctx, "bot1", 0, "restart-1"); err != nil || r.State != "done" {
			t.Fatalf("repeat after restart: %+v %v", r, err)
		}
		if _, execs := e.p.count(); execs != 1 {
			t.Fatalf("%d execs for one restart key", execs)
		}
		if lost, _ := e.svc.LostProcesses("bot1"); lost[0].State != "restarted" || len(lost[0].Restarts) != 1 {
			t.Fatalf("after restart: %+v", lost)
		}
		// The old generation is fenced.
		if err := e.svc.Fence("bot1", 0, "bot1"); !errors.Is(err, ErrStaleGeneration) {
			t.Fatalf("old generation: %v", err)
		}
		if err := e.svc.Fence("bot1", 1, string(op.Replacement)); err != nil {
			t.Fatal(err)
		}
		// And the workspace captures again, from the replacement.
		if r := e.capture(); r.LastGood == cp.Snapshot && r.Snapshot == "" {
			t.Fatalf("capture after recovery: %+v", r)
		}
	})
}

// TestApprovalRules: approval needs a lost workspace, names the offered
// checkpoint, and one key gives one operation, repeated or concurrent.
func TestApprovalRules(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		cp := e.capture()
		if _, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "k"); !errors.Is(err, ErrNotLost) {
			t.Fatalf("approval of a healthy workspace: %v", err)
		}
		if _, err := e.svc.Check(e.ctx, "bot1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "k"); !errors.Is(err, ErrNotLost) || !strings.Contains(err.Error(), "bot1 is healthy;") {
			t.Fatalf("approval of a running workspace: %v", err)
		}
		e.lose()
		if _, err := e.svc.Approve(e.ctx, "bot1", strings.Repeat("0", 64), "k"); !errors.Is(err, ErrStaleOffer) {
			t.Fatalf("approval of another checkpoint: %v", err)
		}
		if _, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, ""); err == nil {
			t.Fatal("approval without a key accepted")
		}
		stop := make(chan struct{})
		e.svc.hooks.step = func(op Operation, point string) error {
			if point == "before:creating" {
				<-stop // hold the operation while the others approve
			}
			return nil
		}
		ops := make([]Operation, 8)
		var wg sync.WaitGroup
		for i := range ops {
			wg.Go(func() {
				var err error
				if ops[i], err = e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "same-key"); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, op := range ops {
			if op.ID != ops[0].ID {
				t.Fatalf("two operations for one key: %s %s", op.ID, ops[0].ID)
			}
		}
		if _, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "other-key"); !errors.Is(err, ErrRecovering) {
			t.Fatalf("second approval while recovering: %v", err)
		}
		if err := e.svc.Guard("bot1"); !errors.Is(err, ErrRecovering) {
			t.Fatalf("bot use while recovering: %v", err)
		}
		if r := e.lc.Capture(e.ctx, "bot1", ReasonManual); r.Outcome != Refused || !errors.Is(r.Err, ErrRecovering) {
			t.Fatalf("capture while recovering: %+v", r)
		}
		if _, err := e.lc.Restart(e.ctx, "bot1"); !errors.Is(err, ErrRecovering) {
			t.Fatalf("restart while recovering: %v", err)
		}
		close(stop)
		op := e.wait(ops[0].ID)
		if op.State != OpRecovered {
			t.Fatalf("operation: %+v", op)
		}
		again, err := e.svc.Approve(e.ctx, "bot1", cp.Snapshot, "same-key")
		if err != nil || again.ID != op.ID || again.State != OpRecovered {
			t.Fatalf("repeated approval after the end: %+v %v", again, err)
		}
		if _, err := e.svc.Approve(e.ctx, "bot1", strings.Repeat("1", 64), "same-key"); !errors.Is(err, ErrKeyReused) {
			t.Fatalf("key reused for another checkpoint: %v", err)
		}
		if creates, _ := e.p.count(); creates != 1 {
			t.Fatalf("%d creates", creates)
		}
	})
}

// TestHealthStates: outage, auth failure and rate limit give their own
// states with an action and the next check, and create nothing; a check
// of the old instance after a recovery changes nothing.
func TestHealthStates(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		e.capture()
		var answer error
		e.p.inspect = func(providers.InstanceID) (providers.Status, error, bool) {
			return providers.Status{}, answer, answer != nil
		}
		cases := []struct {
			err  error
			want HealthState
			next time.Duration
		}{
			{&providers.Error{Provider: "local", Op: "inspect", Kind: providers.KindUnavailable}, HealthUnreachable, time.Minute},
			{&providers.Error{Provider: "local", Op: "inspect", Kind: providers.KindUnauthorized}, HealthAuthFailed, time.Minute},
			{&providers.Error{Provider: "local", Op: "inspect", Kind: providers.KindRateLimited, RetryAfter: 10 * time.Minute}, HealthRateLimited, 10 * time.Minute},
			{&providers.Error{Provider: "local", Op: "inspect", Kind: providers.KindConflict}, HealthCheckFailed, time.Minute},
		}
		for _, c := range cases {
			answer = c.err
			h, err := e.svc.Check(e.ctx, "bot1")
			if err != nil || h.State != c.want || h.Action == "" || !h.NextCheck.Equal(e.clock.Now().Add(c.next)) {
				t.Fatalf("%v: %+v %v", c.err, h, err)
			}
			if _, err := e.svc.Offer(e.ctx, "bot1"); !errors.Is(err, ErrNotLost) {
				t.Fatalf("offer in state %s: %v", h.State, err)
			}
		}
		answer = nil
		if h, _ := e.svc.Check(e.ctx, "bot1"); h.State != HealthOK {
			t.Fatalf("after the outage: %+v", h)
		}
		if creates, _ := e.p.count(); creates != 0 {
			t.Fatalf("%d creates", creates)
		}
	})
}

// TestScheduledDetection: Run inspects on the schedule (fake clock) and
// detects a loss without any request.
func TestScheduledDetection(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newREnv(t, botFiles)
		e.capture()
		events, cancel := e.svc.Subscribe()
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- e.svc.Run(e.ctx) }()
		if err := e.p.Destroy(e.ctx, "bot1"); err != nil {
			t.Fatal(err)
		}
		e.clock.WaitFor(t, time.Minute)
		e.clock.Advance(time.Minute)
		ev := <-events
		if ev.Kind != EventHealth || ev.State != HealthLost || ev.Workspace != "bot1" {
			t.Fatalf("event %+v", ev)
		}
		e.svc.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
