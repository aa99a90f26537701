package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

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

// heldHook is a [[quiesce.hook]] (config) whose pause writes "paused" to
// the FIFO started and then waits for a line on the FIFO released: a
// capture holds in it until the test releases it, or the capture is
// cancelled and the hook killed.
type heldHook struct{ config, started, released string }

func newHeldHook(t *testing.T) heldHook {
	t.Helper()
	dir := t.TempDir()
	h := heldHook{started: filepath.Join(dir, "started"), released: filepath.Join(dir, "release")}
	must(t, unix.Mkfifo(h.started, 0o600))
	must(t, unix.Mkfifo(h.released, 0o600))
	h.config = fmt.Sprintf(`
[[quiesce.hook]]
name = "held"
pause = ["sh", "-c", "echo paused > %s; read x < %s"]
resume = ["true"]
timeout = "5m"
`, h.started, h.released)
	return h
}

// waitPaused returns once the hook holds a capture.
func (h heldHook) waitPaused(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(h.started)
	must(t, err)
	if strings.TrimSpace(string(b)) != "paused" {
		t.Fatalf("hook wrote %q", b)
	}
}

// release lets the holding hook go on. The write blocks until the hook
// reads; a hook cancelled in the meantime never does, so the test's
// cleanup lets the writer go.
func (h heldHook) release(t *testing.T) {
	go func() { _ = os.WriteFile(h.released, []byte("go\n"), 0o600) }()
	t.Cleanup(func() {
		if f, err := os.OpenFile(h.released, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}
