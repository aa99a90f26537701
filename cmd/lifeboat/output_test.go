package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A message holding a value Go decodes but cannot encode (a time with an
// offset of +24:00) is not printed and fails the command with an error
// naming the message; it never panics, and later messages still print.
func TestEmitUnencodableFailsNotPanics(t *testing.T) {
	var bad time.Time
	if err := json.Unmarshal([]byte(`"2026-01-02T03:04:05+24:00"`), &bad); err != nil {
		t.Fatal(err)
	}
	type msg struct {
		MessageType string    `json:"message_type"`
		Time        time.Time `json:"time"`
	}
	var out bytes.Buffer
	p := &printer{w: &out, errw: &out, json: true}
	p.emit(msg{"snapshot", bad}, nil)
	p.emit(msg{"snapshot", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, nil)
	if p.err == nil || !strings.Contains(p.err.Error(), `a "snapshot" message cannot be written as JSON`) {
		t.Fatalf("err = %v", p.err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "2026-01-02T03:04:05Z") {
		t.Fatalf("printed %q", out.String())
	}
	if code := exitCode(p.err); code != exitFailure {
		t.Fatalf("exit code %d, want %d", code, exitFailure)
	}
}

// serve names the host it was told to listen on, with the port it got.
func TestServingAddr(t *testing.T) {
	for _, c := range []struct{ listen, actual, want string }{
		{"0.0.0.0:8080", "[::]:8080", "0.0.0.0:8080"},
		{"127.0.0.1:0", "127.0.0.1:41234", "127.0.0.1:41234"},
		{":0", "[::]:41234", "[::]:41234"},
		{"localhost:0", "127.0.0.1:41234", "localhost:41234"},
		{"[::1]:0", "[::1]:41234", "[::1]:41234"},
	} {
		if got := servingAddr(c.listen, c.actual); got != c.want {
			t.Errorf("servingAddr(%q, %q) = %q, want %q", c.listen, c.actual, got, c.want)
		}
	}
}

// A command whose context a signal ended exits 130 and says it was
// interrupted, in text and JSON, not just "context canceled".
func TestInterruptedSaysSo(t *testing.T) {
	e := newEnv(t)
	e.init()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, args := range [][]string{{"snapshots"}, {"--json", "snapshots"}} {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"--repo", e.repo, "--cache-dir", e.cache, "--password-file", e.passwdFile}, args...), strings.NewReader(""), &out, &errb)
		if code != exitInterrupted || !strings.Contains(errb.String(), "interrupted by a signal (SIGINT or SIGTERM)") {
			t.Fatalf("lifeboat %v under a cancelled context: exit %d: %s", args, code, errb.String())
		}
	}
}
