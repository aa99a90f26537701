package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lifeboat/bench"
	"lifeboat/recovery"
	"lifeboat/recovery/statedb/pgtest"
)

// TestServeTwoServersOneDatabase: two `lifeboat serve` processes with
// their own state directories and one PostgreSQL state store ([state] url,
// here from LIFEBOAT_STATE_URL) drive the same workspace: one registers
// it, the other sees it and captures it; the loss is seen on one, the
// offer read on the other; approvals with one key on both make one
// operation, another key is refused while it runs, and the operation is
// seen to its end on the server that did not drive it. Afterwards the
// checkpoint restores with the repository alone.
func TestServeTwoServersOneDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	url := pgtest.URL(t)
	env := "LIFEBOAT_STATE_URL=" + url
	a := newSvcEnv(t, "")
	b := a.sharing(t)
	a.start(env)
	b.start(env)

	work := a.sandbox("bot1", 1)
	a.cliJSON("workspace", "add", "bot1", "--provider", "local", "--instance", "bot1")
	if w := b.cliJSON("workspace", "show", "bot1"); w["workspace"] != "bot1" && w["id"] != "bot1" {
		t.Fatalf("server B does not see the workspace server A added: %v", w)
	}
	rc := b.cliJSON("capture", "--workspace", "bot1")
	if rc["outcome"] != "captured" {
		t.Fatalf("capture on B: %v", rc)
	}
	good := rc["snapshot"].(string)

	want := filepath.Join(a.dir, "want-bot1")
	must(t, os.Rename(work, want))
	if st := a.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check on A: %v", st)
	}
	if o := b.cliJSON("recovery", "offer", "bot1"); o["checkpoint"] != good {
		t.Fatalf("offer on B: %v", o)
	}
	op := a.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1")
	same := b.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1")
	if same["id"] != op["id"] {
		t.Fatalf("one key, two operations: %v %v", op, same)
	}
	if r := b.cli("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-2"); r.code == 0 {
		t.Fatalf("a second key was approved while the first operation ran or after it ended: %s", r.stdout)
	}
	done := b.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1", "--wait")
	if done["step"] != "recovered" || done["id"] != op["id"] {
		t.Fatalf("operation seen from B: %v", done)
	}
	repl := done["new_instance"].(string)
	if d, err := bench.Compare(want, filepath.Join(a.root, repl)); err != nil || len(d) > 0 {
		t.Fatalf("replacement differs from the captured tree: %v %v", d, err)
	}
	for _, s := range []*svcEnv{a, b} {
		if ops := jsonLines(t, s.cliOK("recovery", "operations", "bot1", "--json").stdout); len(ops) != 1 || ops[0]["id"] != op["id"] {
			t.Fatalf("operations on %s: %v", s.url, ops)
		}
	}
	entries, err := os.ReadDir(a.root)
	must(t, err)
	var instances []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") { // the provider's own files
			instances = append(instances, e.Name())
		}
	}
	if len(instances) != 1 || instances[0] != repl {
		t.Fatalf("instances: %v (want only %s)", instances, repl)
	}
	a.stop()
	b.stop()
	// The checkpoint is in the repository: restorable with the repository
	// and its key alone, without the database.
	back := filepath.Join(a.dir, "restored")
	a.ok("restore", "--workspace", "bot1", "--target", back, "latest")
	if d, err := bench.Compare(want, back); err != nil || len(d) > 0 {
		t.Fatalf("restored without the database: %v %v", d, err)
	}
}

// TestServeSharedStateTakeover: two `lifeboat serve` processes share one
// PostgreSQL state store with a short operation lease ([state] lease).
// Server A drives an approved recovery until its replacement is created,
// and is killed with SIGKILL there; server B, started then, claims the
// operation at its next check once A's lease lapsed, finds the
// replacement A created (by its create key, not a second one) and
// finishes the recovery.
func TestServeSharedStateTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	env := []string{"LIFEBOAT_STATE_URL=" + pgtest.URL(t), "LIFEBOAT_STATE_LEASE=2s", "LIFEBOAT_LIFECYCLE_CHECK_INTERVAL=1s"}
	a := newSvcEnv(t, "")
	a.watch = "at after:creating"
	a.start(append(env, recoveryStopEnv+"=after:creating")...)

	work := a.sandbox("bot1", 1)
	a.cliJSON("workspace", "add", "bot1", "--provider", "local", "--instance", "bot1")
	good := a.cliJSON("capture", "--workspace", "bot1")["snapshot"].(string)
	want := filepath.Join(a.dir, "want-bot1")
	must(t, os.Rename(work, want))
	if st := a.cliJSON("workspace", "check", "bot1"); st["state"] != "lost" {
		t.Fatalf("check on A: %v", st)
	}
	op := a.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1")
	select {
	case <-a.stderr.found:
	case <-time.After(2 * time.Minute):
		t.Fatalf("server A did not reach after:creating\n%s", a.stderr)
	}
	must(t, a.cmd.Process.Signal(syscall.SIGKILL))
	_ = a.cmd.Wait()
	// B starts only now: running beside A, it could claim the operation
	// itself whenever A, slowed down, renewed its short lease late.
	b := a.sharing(t)
	b.watch = ""
	b.start(env...)

	done := b.cliJSON("recovery", "approve", "bot1", "--checkpoint", good, "--idempotency-key", "k-1", "--wait")
	if done["step"] != "recovered" || done["id"] != op["id"] {
		t.Fatalf("operation after the takeover: %v\nB: %s", done, b.stderr)
	}
	repl := done["new_instance"].(string)
	if got := sandboxes(t, a.root); len(got) != 1 || got[0] != repl {
		t.Fatalf("instances: %v (want only %s, the one A created)", got, repl)
	}
	if d, err := bench.Compare(want, filepath.Join(a.root, repl)); err != nil || len(d) > 0 {
		t.Fatalf("replacement differs from the captured tree: %v %v", d, err)
	}
	b.stop()
}

// sharing is a second server beside s: the same repository, provider root
// and tokens, its own state directory and config file.
func (s *svcEnv) sharing(t *testing.T) *svcEnv {
	t.Helper()
	b := *s
	b.state = filepath.Join(s.dir, "state-b")
	b.cfgPath = filepath.Join(s.dir, "lifeboat-b.toml")
	b.cmd, b.url, b.stderr, b.stopped = nil, "", nil, false
	cfg, err := os.ReadFile(s.cfgPath)
	must(t, err)
	must(t, os.WriteFile(b.cfgPath, []byte(strings.Replace(string(cfg), "dir = \""+s.state+"\"", "dir = \""+b.state+"\"", 1)), 0o600))
	return &b
}

// A PostgreSQL state store that cannot be reached stops serve at start
// with exit 24, naming the database without its password.
func TestServeStateDatabaseUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	s := newSvcEnv(t, "")
	must(t, os.WriteFile(filepath.Join(s.dir, "db.pw"), []byte("db-pw-4711\n"), 0o600))
	t.Setenv("LIFEBOAT_STATE_URL", "postgres://lifeboat@"+addr+"/state?sslmode=disable&connect_timeout=5")
	t.Setenv("LIFEBOAT_STATE_PASSWORD_FILE", filepath.Join(s.dir, "db.pw"))
	r := s.run("--config", s.cfgPath, "serve")
	if r.code != exitStateDown || !strings.Contains(r.stderr, addr) || strings.Contains(r.stdout+r.stderr, "db-pw-4711") {
		t.Fatalf("serve on an unreachable database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.run("--config", s.cfgPath, "config", "show"); r.code != 0 || strings.Contains(r.stdout, "db-pw-4711") || !strings.Contains(r.stdout, addr) {
		t.Fatalf("config show: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestServeCaptureStopsWhenLockLost: on a PostgreSQL state store a
// capture holds its workspace's lock in a database session. That session
// ends (pg_terminate_backend here; a cut connection or a restarted
// database in production) while the capture is held in its quiesce hook:
// the capture stops by itself, its receipt failed, retryable and naming
// the lost lock; the workspace keeps no checkpoint and no in-flight mark
// from it; and the next capture, on a new session, succeeds.
func TestServeCaptureStopsWhenLockLost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary")
	}
	url := pgtest.URL(t)
	h := newHeldHook(t)
	s := newSvcEnv(t, h.config)
	s.start("LIFEBOAT_STATE_URL="+url, "LIFEBOAT_LIFECYCLE_QUIESCE_TIMEOUT=5m")
	s.addLocalWorkspace("bot1", 1)
	type answer struct {
		r   recovery.Receipt
		err error
	}
	capture := func() <-chan answer {
		got := make(chan answer, 1)
		go func() {
			r, err := s.client().Capture(context.Background(), "bot1")
			got <- answer{r, err}
		}()
		return got
	}

	got := capture()
	h.waitPaused(t)
	if n := pgtest.EndLockSessions(t, url); n < 1 {
		t.Fatal("no database session held an advisory lock while the capture was held")
	}
	a := <-got // the hook is never released: the capture stops by itself
	if a.err != nil || a.r.Outcome != recovery.Failed || !a.r.Retryable || !strings.Contains(a.r.Error, recovery.ErrLockLost.Error()) {
		t.Fatalf("the capture that lost its lock: %+v %v\n%s", a.r, a.err, s.stderr)
	}
	w := s.cliJSON("workspace", "show", "bot1")
	if w["last_good"] != nil || w["in_flight"] != nil || w["failures"] != 1.0 {
		t.Fatalf("after the capture that lost its lock: %v", w)
	}

	got = capture()
	h.waitPaused(t)
	h.release(t)
	if a := <-got; a.err != nil || a.r.Outcome != recovery.Captured {
		t.Fatalf("the next capture: %+v %v\n%s", a.r, a.err, s.stderr)
	}
}
