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
	fifos := t.TempDir()
	started, release := filepath.Join(fifos, "started"), filepath.Join(fifos, "release")
	must(t, unix.Mkfifo(started, 0o600))
	must(t, unix.Mkfifo(release, 0o600))
	s := newSvcEnv(t, fmt.Sprintf(`
[[quiesce.hook]]
name = "held"
pause = ["sh", "-c", "echo paused > %s; read x < %s"]
resume = ["true"]
timeout = "5m"
`, started, release))
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
	b, err := os.ReadFile(started) // returns once the hook is holding the park
	must(t, err)
	if strings.TrimSpace(string(b)) != "paused" {
		t.Fatalf("hook wrote %q", b)
	}
	must(t, s.cmd.Process.Signal(syscall.SIGTERM))
	go func() { _ = os.WriteFile(release, []byte("go\n"), 0o600) }() // blocks until the hook reads it
	// A hook that was cancelled never reads: let the writer go.
	t.Cleanup(func() {
		if f, err := os.OpenFile(release, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
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
