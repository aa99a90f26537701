package recovery

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestProcessRecordsKeptWithCheckpoints(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e := newEnv(t, false, false, func(c *Config) {
			c.TailBytes = 64
			c.Redact = RedactPatterns(regexp.MustCompile(`sk-[A-Za-z0-9]+`))
		})
		ctx := context.Background()
		if _, err := e.l.StartProcess("nope", []string{"x"}, "/"); err == nil {
			t.Fatal("a process of an unknown workspace was accepted")
		}
		build, err := e.l.StartProcess("ws1", []string{"make", "TOKEN=sk-abc123"}, "/work")
		if err != nil {
			t.Fatal(err)
		}
		server, err := e.l.StartProcess("ws1", []string{"npm", "start"}, "/work/app")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 { // 20 lines of 10 bytes: more than the tail keeps
			_, _ = build.Write([]byte(strings.Repeat(string(rune('a'+i)), 9) + "\n"))
		}
		_, _ = build.Write([]byte("key sk-SECRET99 used\n"))
		build.Exit(2, e.clock.Now())
		_, _ = server.Write([]byte("listening on :3000 — ready\n"))

		e.want(e.l.Capture(ctx, "ws1", ReasonManual), Captured)
		cp := e.ws("ws1").LastGood
		if len(cp.Processes) != 2 {
			t.Fatalf("processes: %+v", cp.Processes)
		}
		b := cp.Processes[0]
		if b.Command[1] != "TOKEN=[REDACTED]" || b.Dir != "/work" || *b.ExitCode != 2 || b.Ended == nil || !b.Truncated {
			t.Fatalf("build record: %+v", b)
		}
		if len(b.Tail) > 64 || !strings.HasSuffix(b.Tail, "key [REDACTED] used\n") || strings.Contains(b.Tail, "SECRET") {
			t.Fatalf("build tail %q", b.Tail)
		}
		s := cp.Processes[1]
		if s.Ended != nil || s.Truncated || s.Tail != "listening on :3000 — ready\n" {
			t.Fatalf("server record: %+v", s)
		}
		// The exited build is recorded once; the running server stays.
		e.clock.Advance(time.Minute)
		_, _ = server.Write([]byte("GET /\n"))
		e.want(e.l.Capture(ctx, "ws1", ReasonManual), Captured)
		cp = e.ws("ws1").LastGood
		if len(cp.Processes) != 1 || cp.Processes[0].Command[0] != "npm" || !strings.HasSuffix(cp.Processes[0].Tail, "GET /\n") {
			t.Fatalf("second checkpoint's processes: %+v", cp.Processes)
		}
		hist, err := e.store.Checkpoints("ws1")
		if err != nil || len(hist) != 2 || len(hist[0].Processes) != 2 {
			t.Fatalf("history keeps each checkpoint's records: %+v %v", hist, err)
		}
	})
}

func TestProcessTailCutsWholeCharacters(t *testing.T) {
	p := &Process{max: 5}
	_, _ = p.Write([]byte("ééé")) // 6 bytes: the cut falls inside the first é
	r := p.record(nil)
	if r.Tail != "éé" || !r.Truncated {
		t.Fatalf("tail %q truncated %v", r.Tail, r.Truncated)
	}
	q := &Process{max: 8}
	_, _ = q.Write([]byte("abc"))
	_, _ = q.Write([]byte("defgh"))
	if r := q.record(nil); r.Tail != "abcdefgh" || r.Truncated {
		t.Fatalf("exact fit: %+v", r)
	}
	_, _ = q.Write([]byte("i"))
	if r := q.record(nil); r.Tail != "bcdefghi" || !r.Truncated {
		t.Fatalf("one over: %+v", r)
	}
}

// TestRecoveryEndsRegistrationsOfTheLostInstance: a process registered on
// the lost instance is reported lost by the recovery and is no longer
// registered: the replacement's checkpoints do not record it, and only a
// process registered after the recovery is.
func TestRecoveryEndsRegistrationsOfTheLostInstance(t *testing.T) {
	e := newREnv(t, botFiles)
	old, err := e.lc.StartProcess("bot1", []string{"sleep-loop", "--token=abc"}, ".")
	if err != nil {
		t.Fatal(err)
	}
	cp := e.capture()
	e.lose()
	op := e.wait(e.approve(cp.Snapshot, "approve-1").ID)
	if op.State != OpRecovered {
		t.Fatalf("operation: %+v", op)
	}
	if lost, err := e.svc.LostProcesses("bot1"); err != nil || len(lost) != 1 || lost[0].Command[0] != "sleep-loop" {
		t.Fatalf("lost processes: %+v %v", lost, err)
	}
	if reg, err := e.lc.Processes("bot1"); err != nil || len(reg) != 0 {
		t.Fatalf("registered after the recovery: %+v %v", reg, err)
	}
	if _, err := e.lc.Process("bot1", old.ID()); !errors.Is(err, ErrUnknownProcess) || !strings.Contains(err.Error(), "recovery") {
		t.Fatalf("the lost instance's process is still known: %v", err)
	}
	if _, err := e.lc.StartProcess("bot1", []string{"serve"}, "."); err != nil {
		t.Fatal(err)
	}
	e.capture()
	w, err := e.store.Workspace("bot1")
	if err != nil {
		t.Fatal(err)
	}
	if ps := w.LastGood.Processes; len(ps) != 1 || ps[0].Command[0] != "serve" {
		t.Fatalf("the replacement's checkpoint records %+v", ps)
	}
}
