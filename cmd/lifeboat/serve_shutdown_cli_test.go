package main

import (
	"context"
	"syscall"
	"testing"

	"lifeboat/recovery"
)

// TestServeShutdownGrace: with [server] shutdown_grace set, SIGTERM lets a
// park in progress finish (its quiesce hook is held until after the
// signal): the request gets a captured receipt, the checkpoint is the
// workspace's last good one, and serve exits 0.
func TestServeShutdownGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	h := newHeldHook(t)
	s := newSvcEnv(t, h.config)
	s.start("LIFEBOAT_SERVER_SHUTDOWN_GRACE=5m", "LIFEBOAT_LIFECYCLE_QUIESCE_TIMEOUT=5m")
	s.addLocalWorkspace("bot1", 1)

	type answer struct {
		r   recovery.Receipt
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := s.client().Park(context.Background(), "bot1")
		got <- answer{r, err}
	}()
	h.waitPaused(t)
	must(t, s.cmd.Process.Signal(syscall.SIGTERM))
	h.release(t)
	a := <-got
	if a.err != nil || a.r.Outcome != recovery.Captured {
		t.Fatalf("park across the shutdown: %+v %v\n%s", a.r, a.err, s.stderr)
	}
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, s.stderr)
	}
	s.stopped = true
	if w := s.showWorkspace([]string{"--state-dir", s.state}, "bot1"); w.LastGood == nil || w.LastGood.Snapshot != a.r.Snapshot {
		t.Fatalf("last good after the shutdown: %+v, want %s", w.LastGood, a.r.Snapshot)
	}
}
