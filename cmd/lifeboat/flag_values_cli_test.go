package main

import (
	"strings"
	"testing"
)

// A LIFEBOAT_LOCK_WAIT that is not a duration of zero or more is refused
// with exit 2 naming the variable, its value and the expected form, not
// quietly replaced by the default wait; --lock-wait given on the command
// line takes its place.
func TestLockWaitEnvRefusesBadValues(t *testing.T) {
	e := newEnv(t)
	e.init()
	for _, v := range []string{"abc", "5", "-1s"} {
		t.Setenv("LIFEBOAT_LOCK_WAIT", v)
		r := e.run("snapshots")
		if r.code != exitUsage || !strings.Contains(r.stderr, `LIFEBOAT_LOCK_WAIT="`+v+`"`) || !strings.Contains(r.stderr, "5m") {
			t.Errorf("LIFEBOAT_LOCK_WAIT=%s: exit %d: %s", v, r.code, r.stderr)
		}
		r = e.run("--json", "snapshots")
		if lines := jsonLines(t, r.stderr); r.code != exitUsage || len(lines) != 1 || lines[0]["message_type"] != "exit_error" {
			t.Errorf("--json, LIFEBOAT_LOCK_WAIT=%s: exit %d: %s", v, r.code, r.stderr)
		}
		e.ok("--lock-wait", "1s", "snapshots")
	}
	for _, v := range []string{"0", "30s", "5m"} {
		t.Setenv("LIFEBOAT_LOCK_WAIT", v)
		e.ok("snapshots")
	}
}

// Negative values of --lock-wait, capture --readers and restore --workers
// are refused with exit 2 naming the flag, before anything is done.
func TestNegativeCountFlagsRefused(t *testing.T) {
	e := newEnv(t)
	e.init()
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--lock-wait", []string{"--lock-wait", "-1s", "snapshots"}},
		{"--readers", []string{"capture", "--readers", "-2", "--workspace", "w", e.dir}},
		{"--workers", []string{"restore", "--workers", "-2", "--workspace", "w", "--target", e.dir + "/out", "latest"}},
	} {
		r := e.run(c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.flag+" -") || !strings.Contains(r.stderr, "want 0 or more") {
			t.Errorf("%v: exit %d: %s", c.args, r.code, r.stderr)
		}
	}
	if out := e.run("snapshots", "--json"); out.code != exitOK || len(jsonLines(t, out.stdout)) != 0 {
		t.Fatalf("a refused capture saved a snapshot: exit %d: %s", out.code, out.stdout)
	}
}
