package recovery

import (
	"context"
	"log/slog"
)

// logReceipt logs a capture or park that left no current checkpoint: at
// warn when it may succeed if simply tried again (Receipt.Retryable), else
// at error; one cancelled or refused (nothing was tried, or the server
// stopped it) at info. The error goes through Config.Redact, as process
// records do.
func (l *Lifecycle) logReceipt(r Receipt) {
	if r.OK() || r.Error == "" {
		return
	}
	level, msg := slog.LevelError, "capture failed"
	switch {
	case r.Outcome == Cancelled:
		level, msg = slog.LevelInfo, "capture cancelled"
	case r.Outcome == Refused:
		level, msg = slog.LevelInfo, "capture refused"
	case r.Retryable:
		level = slog.LevelWarn
	}
	text := r.Error
	if l.cfg.Redact != nil {
		text = l.cfg.Redact(text)
	}
	attrs := []any{"workspace", r.Workspace, "reason", r.Reason, "outcome", r.Outcome, "retryable", r.Retryable}
	if r.Attempt > 0 {
		attrs = append(attrs, "attempt", r.Attempt)
	}
	if r.Snapshot != "" { // a partial snapshot, not promoted
		attrs = append(attrs, "snapshot", r.Snapshot)
	}
	l.log.Log(context.Background(), level, msg, append(attrs, "err", text)...)
}
