package recovery

import (
	"context"
	"testing"
	"time"

	"lifeboat/providers"
)

func TestPeriodicCaptureSkipsUnchanged(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		receipts := make(chan Receipt, 16)
		e := newEnv(t, false, true, func(c *Config) {
			c.PeriodicInterval = 10 * time.Minute
			c.OnReceipt = func(r Receipt) { receipts <- r }
		})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.l.Run(ctx) }()
		round := func(want Outcome) Receipt {
			t.Helper()
			e.clock.WaitFor(t, 10*time.Minute)
			e.clock.Advance(10 * time.Minute)
			r := <-receipts
			if r.Reason != ReasonPeriodic || r.Outcome != want {
				t.Fatalf("periodic receipt %+v, want %s", r, want)
			}
			return r
		}
		first := round(Captured)
		round(Unchanged)
		round(Unchanged)
		writeFiles(t, e.prov.dir("i1"), map[string]string{"sub/c.txt": "charlie"})
		second := round(Captured)
		if second.Snapshot == first.Snapshot || second.Files != 3 {
			t.Fatalf("second periodic capture: %+v", second)
		}
		round(Unchanged)
		e.prov.mu.Lock()
		e.prov.state["i1"] = providers.Stopped
		e.prov.mu.Unlock()
		writeFiles(t, e.prov.dir("i1"), map[string]string{"sub/d.txt": "delta"})
		round(NotRunning)
		cancel()
		if err := <-done; err != context.Canceled {
			t.Fatalf("Run returned %v", err)
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 2 {
			t.Fatalf("%d snapshots, want 2", n)
		}
	})
}

// TestPeriodicReceiptTimesTheDecision: a periodic round that captures
// nothing still reports when it started and when it had decided (the
// fingerprint's walk, the provider's answer), so its receipt says how
// long the check took.
func TestPeriodicReceiptTimesTheDecision(t *testing.T) {
	e := newEnv(t, false, true, nil)
	ctx := context.Background()
	if rs := e.l.Tick(ctx); len(rs) != 1 || rs[0].Outcome != Captured {
		t.Fatalf("first round: %+v", rs)
	}
	const took = 3 * time.Second
	e.prov.readFilesHook = func() { e.clock.Advance(took) }
	rs := e.l.Tick(ctx)
	if len(rs) != 1 || rs[0].Outcome != Unchanged || rs[0].Finished.Sub(rs[0].Started) != took {
		t.Fatalf("unchanged round: %+v, want outcome unchanged finished %s after it started", rs, took)
	}
	e.prov.readFilesHook = nil
	e.prov.mu.Lock()
	e.prov.state["i1"] = providers.Stopped
	e.prov.mu.Unlock()
	rs = e.l.Tick(ctx)
	if len(rs) != 1 || rs[0].Outcome != NotRunning || rs[0].Finished.Before(rs[0].Started) {
		t.Fatalf("stopped round: %+v", rs)
	}
}
