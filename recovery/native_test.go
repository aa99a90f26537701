package recovery

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNativeKeepNewestAndRetryFailedDelete(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, nil)
		ctx := context.Background()
		r := e.l.Park(ctx, "ws1")
		e.want(r, Captured)
		if r.Native != "cp-1" || e.ws("ws1").Native.ID != "cp-1" {
			t.Fatalf("first native checkpoint: %+v", r)
		}
		e.clock.Advance(5 * time.Minute)
		r = e.l.Park(ctx, "ws1")
		if r.Native != "cp-2" || !reflect.DeepEqual(e.prov.checkpointIDs(), []string{"cp-2"}) {
			t.Fatalf("second park: %+v, provider holds %v", r, e.prov.checkpointIDs())
		}
		// The delete of the previous one fails: it is remembered.
		e.prov.failDeletes = 1
		e.clock.Advance(5 * time.Minute)
		r = e.l.Park(ctx, "ws1")
		e.want(r, Captured)
		if r.Native != "cp-3" || e.ws("ws1").Native.ID != "cp-3" {
			t.Fatalf("third park: %+v", r)
		}
		pending, err := e.store.Pending("ws1")
		if err != nil || len(pending) != 1 || pending[0].Checkpoint != "cp-2" || pending[0].Attempts != 1 || !strings.Contains(pending[0].LastError, "scripted outage") {
			t.Fatalf("pending after a failed delete: %+v, %v", pending, err)
		}
		if got := e.prov.checkpointIDs(); !reflect.DeepEqual(got, []string{"cp-2", "cp-3"}) {
			t.Fatalf("provider holds %v", got)
		}
		// The next park retries it, even when the park itself is throttled;
		// a second failure is counted and kept too.
		e.prov.failDeletes = 1
		e.clock.Advance(time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Throttled)
		if pending, _ := e.store.Pending("ws1"); len(pending) != 1 || pending[0].Attempts != 2 {
			t.Fatalf("pending after a second failure: %+v", pending)
		}
		e.clock.Advance(time.Minute)
		e.want(e.l.Park(ctx, "ws1"), Throttled)
		if pending, _ := e.store.Pending("ws1"); len(pending) != 0 {
			t.Fatalf("pending after the retry: %+v", pending)
		}
		if got := e.prov.checkpointIDs(); !reflect.DeepEqual(got, []string{"cp-3"}) {
			t.Fatalf("provider holds %v, want only the newest", got)
		}
	})
}

// The native checkpoint comes before the portable capture, on its own
// clock: a portable capture that fails after it is retried without a
// second native checkpoint.
func TestNativeThrottleIndependent(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, func(c *Config) { c.NativeInterval = 30 * time.Minute })
		ctx := context.Background()
		e.want(e.l.Park(ctx, "ws1"), Captured) // t0: native cp-1, then portable
		e.clock.Advance(6 * time.Minute)
		r := e.l.Park(ctx, "ws1") // portable only: the native interval has not passed
		e.want(r, Captured)
		if r.Native != "" {
			t.Fatalf("native checkpoint inside its interval: %+v", r)
		}
		// t0+31: the native checkpoint is due and taken first; the portable
		// capture after it fails, and is recorded.
		e.cap.fail[3] = errors.New("scripted")
		e.clock.Advance(25 * time.Minute)
		r = e.l.Park(ctx, "ws1")
		e.want(r, Failed)
		if r.Native != "cp-2" || !reflect.DeepEqual(e.prov.checkpointIDs(), []string{"cp-2"}) {
			t.Fatalf("park with a failing portable capture: %+v, provider holds %v", r, e.prov.checkpointIDs())
		}
		if w := e.ws("ws1"); w.Native == nil || w.Native.ID != "cp-2" || w.Failures != 1 {
			t.Fatalf("workspace after the failed capture: %+v", w)
		}
		// Its retry at once captures without another native checkpoint.
		e.clock.Advance(time.Minute)
		r = e.l.Park(ctx, "ws1")
		if r.Outcome != Captured || r.Native != "" || !reflect.DeepEqual(e.prov.checkpointIDs(), []string{"cp-2"}) {
			t.Fatalf("retry: %+v, provider holds %v", r, e.prov.checkpointIDs())
		}
	})
}

// A throttled park still takes a native checkpoint when its own interval
// (shorter here) has passed.
func TestThrottledParkTakesDueNativeCheckpoint(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, func(c *Config) { c.ParkInterval, c.NativeInterval = time.Hour, time.Minute })
		ctx := context.Background()
		e.want(e.l.Park(ctx, "ws1"), Captured) // cp-1
		e.clock.Advance(2 * time.Minute)
		r := e.l.Park(ctx, "ws1")
		if r.Outcome != Throttled || r.Native != "cp-2" || !reflect.DeepEqual(e.prov.checkpointIDs(), []string{"cp-2"}) {
			t.Fatalf("throttled park: %+v, provider holds %v", r, e.prov.checkpointIDs())
		}
		r = e.l.Park(ctx, "ws1") // neither is due
		if r.Outcome != Throttled || r.Native != "" {
			t.Fatalf("second throttled park: %+v", r)
		}
	})
}

func TestNativeCheckpointFailureKeepsCapture(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, nil)
		if err := os.RemoveAll(filepath.Join(e.prov.root, "checkpoints")); err != nil { // Checkpoint's copy fails
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.prov.root, "checkpoints"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.l.Capture(context.Background(), "ws1", ReasonManual)
		e.want(r, Captured)
		if r.NativeError == "" || r.Native != "" {
			t.Fatalf("receipt: %+v", r)
		}
		w := e.ws("ws1")
		if w.Native != nil || w.Failures != 0 || len(w.Recovery) != 1 || w.Recovery[0].Outcome != NativeFailed {
			t.Fatalf("workspace: %+v", w)
		}
	})
}

func TestRestartWithoutNativeCheckpoint(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, nil)
		before := e.ws("ws1")
		_, err := e.l.Restart(context.Background(), "ws1")
		if !errors.Is(err, ErrNoNativeCheckpoint) || !strings.Contains(err.Error(), "nothing was changed") {
			t.Fatalf("restart without a native checkpoint: %v", err)
		}
		if after := e.ws("ws1"); !reflect.DeepEqual(before, after) {
			t.Fatalf("workspace changed: %+v -> %+v", before, after)
		}
		if b, err := os.ReadFile(filepath.Join(e.prov.dir("i1"), "a.txt")); err != nil || string(b) != "alpha" {
			t.Fatalf("instance touched: %q %v", b, err)
		}
	})
}

func TestRestartRollsBackToNativeCheckpoint(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, true, false, nil)
		ctx := context.Background()
		e.want(e.l.Capture(ctx, "ws1", ReasonManual), Captured)
		writeFiles(t, e.prov.dir("i1"), map[string]string{"a.txt": "damaged by the agent", "new.txt": "x"})

		// A failed rollback leaves everything as it was.
		e.prov.failRollback = errors.New("scripted outage")
		before := e.ws("ws1")
		if _, err := e.l.Restart(ctx, "ws1"); err == nil || !strings.Contains(err.Error(), "the workspace is unchanged") {
			t.Fatalf("failed rollback: %v", err)
		}
		if after := e.ws("ws1"); !reflect.DeepEqual(before, after) {
			t.Fatalf("workspace changed by a failed rollback: %+v", after)
		}
		e.prov.failRollback = nil

		rr, err := e.l.Restart(ctx, "ws1")
		if err != nil {
			t.Fatal(err)
		}
		if rr.From != "i1" || rr.To == "i1" || rr.To == "" || rr.Checkpoint != "cp-1" || rr.Generation != 1 {
			t.Fatalf("restart receipt: %+v", rr)
		}
		w := e.ws("ws1")
		if w.ID != "ws1" || w.Instance != rr.To || w.Generation != 1 || w.LastRestart == nil || w.LastRestart.From != "i1" {
			t.Fatalf("workspace after restart: %+v", w)
		}
		if b, err := os.ReadFile(filepath.Join(e.prov.dir(rr.To), "a.txt")); err != nil || string(b) != "alpha" {
			t.Fatalf("rolled-back file: %q %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(e.prov.dir(rr.To), "new.txt")); !os.IsNotExist(err) {
			t.Fatalf("file made after the checkpoint survived the rollback: %v", err)
		}
		// Captures now go to the new instance and record it.
		r := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(r, Captured)
		if cp := e.ws("ws1").LastGood; cp.Instance != rr.To || cp.Generation != 1 {
			t.Fatalf("checkpoint after restart: %+v", cp)
		}
	})
}
