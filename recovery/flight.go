package recovery

import (
	"context"
	"fmt"
	"runtime/debug"
)

// flight is one capture in progress for a workspace; requests that arrive
// while it runs join it and get its receipt.
type flight struct {
	done    chan struct{}
	rec     Receipt // set before done is closed
	waiters int     // callers still waiting; the last one to give up cancels
	cancel  context.CancelFunc
}

// Capture takes a checkpoint of workspace ws now, whatever the throttle
// says, or joins the one in flight. It returns when the capture ended or
// ctx is done. A caller that gives up does not cancel a capture others
// still wait for; the last one to give up does, and gets its receipt.
func (l *Lifecycle) Capture(ctx context.Context, ws string, reason Reason) Receipt {
	return l.join(ctx, ws, reason, nil)
}

// join joins the flight of ws or starts one. answer, when set, is asked
// first (under l.mu, with no flight in progress) and may answer without a
// capture (the park throttle).
func (l *Lifecycle) join(ctx context.Context, ws string, reason Reason, answer func(ws string) (Receipt, bool)) Receipt {
	l.mu.Lock()
	f := l.flight[ws]
	if f == nil {
		if answer != nil {
			if r, ok := answer(ws); ok {
				l.mu.Unlock()
				l.emit(&r)
				return r
			}
		}
		fctx, cancel := context.WithCancel(l.base)
		f = &flight{done: make(chan struct{}), cancel: cancel}
		l.flight[ws] = f
		l.wg.Add(1)
		go l.fly(fctx, f, ws, reason)
	}
	f.waiters++
	if l.hooks.joined != nil {
		l.hooks.joined(ws, f.waiters)
	}
	l.mu.Unlock()
	select {
	case <-f.done:
		return f.rec
	case <-ctx.Done():
	}
	l.mu.Lock()
	f.waiters--
	last := f.waiters == 0
	if last && l.flight[ws] == f {
		delete(l.flight, ws) // later requests start afresh
	}
	l.mu.Unlock()
	if last {
		f.cancel()
		<-f.done
		return f.rec
	}
	r := Receipt{Workspace: ws, Reason: reason, Started: l.clock.Now(), Finished: l.clock.Now()}
	r.fail(Cancelled, ctx.Err())
	return r
}

// fly runs one flight to its end, recovers a panic into a failure, and
// publishes the receipt.
func (l *Lifecycle) fly(ctx context.Context, f *flight, ws string, reason Reason) {
	defer l.wg.Done()
	defer f.cancel()
	rec := Receipt{Workspace: ws, Reason: reason, Started: l.clock.Now()}
	defer func() {
		if v := recover(); v != nil {
			l.log.Error("capture panicked", "workspace", ws, "panic", l.redact(fmt.Sprint(v)), "stack", string(debug.Stack()))
			if rec.Outcome == Captured { // promoted; the panic came after (retention)
				rec.RetentionError = (&PanicError{Value: v}).Error()
			} else {
				l.failed(ctx, ws, &rec, Failed, &PanicError{Value: v})
			}
		}
		rec.Finished = l.clock.Now()
		l.redactReceipt(&rec)
		l.mu.Lock()
		if l.flight[ws] == f {
			delete(l.flight, ws)
		}
		f.rec = rec
		l.mu.Unlock()
		close(f.done)
		l.announce(rec)
	}()
	l.run(ctx, ws, &rec)
}

// emit redacts r's errors (Config.Redact), then logs and hands it on;
// the caller returns it as it is now.
func (l *Lifecycle) emit(r *Receipt) {
	l.redactReceipt(r)
	l.announce(*r)
}

// announce logs a redacted receipt and hands it to Config.OnReceipt.
func (l *Lifecycle) announce(r Receipt) {
	l.logReceipt(r)
	if l.cfg.OnReceipt != nil {
		l.cfg.OnReceipt(r)
	}
}
