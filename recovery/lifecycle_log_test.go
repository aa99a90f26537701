package recovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"lifeboat/backend"
)

// recordHandler hands every log record to a channel.
type recordHandler struct{ ch chan slog.Record }

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.ch <- r.Clone()
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

// attrs returns a record's attributes as strings.
func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	return m
}

// A failed capture is logged, with its workspace, reason, outcome and
// error, the error redacted in the log line, the receipt and the
// workspace's recovery record alike: at warn when it is retryable (a storage
// outage), at error when it is not. A successful one is not logged.
func TestFailedCaptureLogged(t *testing.T) {
	logs := recordHandler{make(chan slog.Record, 16)}
	e := newEnv(t, false, false, func(c *Config) {
		c.Logger = slog.New(logs)
		c.Redact = RedactPatterns(regexp.MustCompile(`--token=\S+`))
	})
	ctx := context.Background()
	e.cap.fail[1] = fmt.Errorf("capture: saving data/898a: --token=sekrit: %w", backend.ErrUnavailable)
	e.cap.fail[2] = errors.New("scripted --token=sekrit refusal")
	e.cap.fail[4] = errors.New("scripted failure after a success")
	for i, want := range []struct {
		level   slog.Level
		attempt string
		err     string
	}{
		{slog.LevelWarn, "1", "capture: saving data/898a: [REDACTED] storage unavailable"},
		{slog.LevelError, "2", "scripted [REDACTED] refusal"},
		{slog.LevelError, "1", "scripted failure after a success"},
	} {
		if i == 2 {
			e.want(e.l.Capture(ctx, "ws1", ReasonManual), Captured)
		}
		r := e.l.Capture(ctx, "ws1", ReasonManual)
		e.want(r, Failed)
		if r.Error != want.err {
			t.Fatalf("failure %d: receipt error %q, want %q", i+1, r.Error, want.err)
		}
		w, err := e.l.store.Workspace("ws1")
		if err != nil {
			t.Fatal(err)
		}
		if last := w.Recovery[len(w.Recovery)-1]; last.Error != want.err {
			t.Fatalf("failure %d: recovery record error %q, want %q", i+1, last.Error, want.err)
		}
		rec := <-logs.ch
		a := attrs(rec)
		if rec.Level != want.level || rec.Message != "capture failed" || a["workspace"] != "ws1" || a["reason"] != "manual" ||
			a["outcome"] != "failed" || a["attempt"] != want.attempt || a["err"] != want.err || strings.Contains(a["err"], "sekrit") {
			t.Fatalf("failure %d logged at %s: %q %v; want %s, err %q", i+1, rec.Level, rec.Message, a, want.level, want.err)
		}
	}
	select {
	case rec := <-logs.ch:
		t.Fatalf("one more log line: %s %q %v", rec.Level, rec.Message, attrs(rec))
	default:
	}
}
