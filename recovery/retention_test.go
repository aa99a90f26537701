package recovery

import (
	"context"
	"testing"
	"time"

	"lifeboat/checkpoint"
	"lifeboat/prune"
)

func TestRetentionRunsAfterSuccessfulCaptures(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		var e *env
		e = newEnv(t, false, true, func(c *Config) {
			c.Retention = retentionFunc(func(ctx context.Context, ws, lastGood string) error {
				return RepoRetention{Repo: e.r, Now: e.clock.Now}.Apply(ctx, ws, lastGood)
			})
		})
		ctx := context.Background()
		// No stored policy: nothing is removed.
		for i := range 3 {
			writeFiles(t, e.prov.dir("i1"), map[string]string{"a.txt": string(rune('a' + i))})
			e.want(e.l.Capture(ctx, "ws1", ReasonManual), Captured)
			e.clock.Advance(time.Minute)
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 3 {
			t.Fatalf("%d snapshots without a policy, want 3", n)
		}
		if _, err := prune.SetPolicy(ctx, e.r, "ws1", prune.Policy{Last: 2}, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		// A failed capture does not run retention.
		e.cap.fail[4] = errFake
		e.want(e.l.Capture(ctx, "ws1", ReasonManual), Failed)
		if n := countSnapshots(t, e.r, "ws1"); n != 3 {
			t.Fatalf("%d snapshots after a failed capture, want 3", n)
		}
		writeFiles(t, e.prov.dir("i1"), map[string]string{"a.txt": "zulu"})
		r := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(r, Captured)
		if r.RetentionError != "" {
			t.Fatal(r.RetentionError)
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 2 {
			t.Fatalf("%d snapshots after retention keep-last 2, want 2", n)
		}
		if err := checkpoint.Verify(ctx, e.r, mustID(t, r.Snapshot)); err != nil {
			t.Fatalf("the last good checkpoint after retention: %v", err)
		}
	})
}

type retentionFunc func(ctx context.Context, ws, lastGood string) error

func (f retentionFunc) Apply(ctx context.Context, ws, lastGood string) error {
	return f(ctx, ws, lastGood)
}

// The snapshot the lifecycle promoted is kept even when a newer complete
// one (made outside the lifecycle) is the policy's only keeper.
func TestRetentionKeepsLastGood(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, true, nil)
		ctx := context.Background()
		r := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(r, Captured)
		writeFiles(t, e.prov.dir("i1"), map[string]string{"a.txt": "newer"})
		e.clock.Advance(time.Minute)
		if _, err := (&RepoCapturer{Repo: e.r}).Capture(ctx, CaptureRequest{Workspace: e.ws("ws1"), Dir: e.prov.dir("i1"), Reason: ReasonManual}); err != nil {
			t.Fatal(err)
		}
		if _, err := prune.SetPolicy(ctx, e.r, "ws1", prune.Policy{Last: 1}, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := (RepoRetention{Repo: e.r}).Apply(ctx, "ws1", r.Snapshot); err != nil {
			t.Fatal(err)
		}
		if n := countSnapshots(t, e.r, "ws1"); n != 2 {
			t.Fatalf("%d snapshots, want 2 (the newest and the last good)", n)
		}
		if err := checkpoint.Verify(ctx, e.r, mustID(t, r.Snapshot)); err != nil {
			t.Fatal(err)
		}
	})
}

// A retention that panics does not undo a promoted capture, and the
// failure is reported without counting as a failed capture.
func TestRetentionPanicKeepsCapture(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, func(c *Config) {
			c.Retention = retentionFunc(func(context.Context, string, string) error { panic("scripted retention panic") })
		})
		r := e.l.Capture(context.Background(), "ws1", ReasonManual)
		e.want(r, Captured)
		if r.RetentionError == "" {
			t.Fatalf("receipt: %+v", r)
		}
		if w := e.ws("ws1"); w.Failures != 0 || len(w.Recovery) != 0 || w.LastGood.Snapshot != r.Snapshot || w.InFlight != nil {
			t.Fatalf("workspace: %+v", w)
		}
	})
}
