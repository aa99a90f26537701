package recovery

import (
	"context"
	"log/slog"
)

// logReceipt logs a capture or park that left no current checkpoint: at
// warn when it may succeed if simply tried again (Receipt.Retryable), else
// at error; one cancelled or refused (nothing was tried, or the server
// stopped it) at info. The receipt was redacted before (emit).
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
	attrs := []any{"workspace", r.Workspace, "reason", r.Reason, "outcome", r.Outcome, "retryable", r.Retryable}
	if r.Attempt > 0 {
		attrs = append(attrs, "attempt", r.Attempt)
	}
	if r.Snapshot != "" { // a partial snapshot, not promoted
		attrs = append(attrs, "snapshot", r.Snapshot)
	}
	l.log.Log(context.Background(), level, msg, append(attrs, "err", r.Error)...)
}

// redact applies Config.Redact, if any, to an error text that leaves the
// lifecycle: in a receipt, a recovery record or a log line.
func (l *Lifecycle) redact(text string) string {
	if l.cfg.Redact == nil {
		return text
	}
	return l.cfg.Redact(text)
}

// redactReceipt redacts the error texts of r (Err, for the caller's
// errors.Is, stays as it is and is never serialised).
func (l *Lifecycle) redactReceipt(r *Receipt) {
	r.Error, r.NativeError, r.RetentionError = l.redact(r.Error), l.redact(r.NativeError), l.redact(r.RetentionError)
}
