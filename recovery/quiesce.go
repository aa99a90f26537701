package recovery

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"lifeboat/profile"
	"lifeboat/providers"
)

// Writer is something that writes into a workspace and must hold still
// while it is captured: an agent's tool runner, a database, a browser.
//
// Contract: Pause returns once the writer has stopped writing (or fails);
// it must honour ctx, which ends at the quiesce deadline. Resume must be
// safe to call after a Pause that failed or timed out, and more than once.
type Writer interface {
	Name() string
	Pause(ctx context.Context, w Workspace, p providers.Provider) error
	Resume(ctx context.Context, w Workspace, p providers.Provider) error
}

// ExecWriter pauses and resumes a writer by running commands in the
// instance through the provider (e.g. `pkill -STOP -f chromium` and
// `pkill -CONT -f chromium`, or a tool runner's own pause command).
type ExecWriter struct {
	Label         string
	PauseCommand  []string
	ResumeCommand []string
	// Timeout bounds each command (0: only the lifecycle's quiesce and
	// resume timeouts apply).
	Timeout time.Duration
	// Redact rewrites the end of a failed command's output before an
	// error shows it; RegisterWriter sets the lifecycle's (Config.Redact)
	// when it is nil.
	Redact Redactor
}

// hookOutputBytes bounds the end of a failed command's output an error
// shows.
const hookOutputBytes = 512

// Name is the writer's label.
func (e ExecWriter) Name() string { return e.Label }

// Pause runs PauseCommand; a non-zero exit is an error.
func (e ExecWriter) Pause(ctx context.Context, w Workspace, p providers.Provider) error {
	return e.run(ctx, w, p, e.PauseCommand)
}

// Resume runs ResumeCommand; a non-zero exit is an error.
func (e ExecWriter) Resume(ctx context.Context, w Workspace, p providers.Provider) error {
	return e.run(ctx, w, p, e.ResumeCommand)
}

func (e ExecWriter) run(ctx context.Context, w Workspace, p providers.Provider, argv []string) error {
	if len(argv) == 0 {
		return nil
	}
	cctx := ctx
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	res, err := p.Exec(cctx, w.Instance, argv, nil)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%q did not finish within the hook's own timeout of %s; raise the hook's timeout or fix the hook: %w", argv[0], e.Timeout, err)
	}
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		if out := e.outputEnd(res); out != "" {
			return fmt.Errorf("%q exited with %d; its output ends: %s", argv[0], res.ExitCode, out)
		}
		return fmt.Errorf("%q exited with %d", argv[0], res.ExitCode)
	}
	return nil
}

// outputEnd is the end of a failed command's stderr (its stdout when
// stderr is empty), at most hookOutputBytes on one line, redacted. The
// whole output is redacted before it is cut, so a secret the cut would
// split is still found.
func (e ExecWriter) outputEnd(res providers.ExecResult) string {
	out := bytes.TrimSpace(res.Stderr)
	if len(out) == 0 {
		out = bytes.TrimSpace(res.Stdout)
	}
	if e.Redact != nil {
		out = []byte(e.Redact(strings.ToValidUTF8(string(out), "\uFFFD")))
	}
	p := &Process{max: hookOutputBytes}
	_, _ = p.Write(out)
	return strings.Join(strings.Fields(p.record(nil).Tail), " ")
}

// instancePause pauses the whole instance through its provider (a
// container's cgroup freezer) after the registered writers, and resumes it
// first.
type instancePause struct{ p providers.CapturePauser }

func (instancePause) Name() string { return "the instance (provider pause)" }
func (i instancePause) Pause(ctx context.Context, w Workspace, _ providers.Provider) error {
	return i.p.Pause(ctx, w.Instance)
}
func (i instancePause) Resume(ctx context.Context, w Workspace, _ providers.Provider) error {
	return i.p.Resume(ctx, w.Instance)
}

// quiesceWriters are what a capture of w on p pauses: the registered
// writers, then the instance itself when p can pause it with its files
// readable (see providers.CapturePauser). paused says whether the last is
// there.
func (l *Lifecycle) quiesceWriters(w Workspace, p providers.Provider) (ws []Writer, paused bool) {
	ws = l.writers(w.ID)
	if cp, ok := p.(providers.CapturePauser); ok && p.Capabilities().Pause && cp.PausedFilesReadable() {
		ws, paused = append(ws, instancePause{cp}), true
	}
	return ws, paused
}

// clockDeadline returns a context that ends when d has passed on the
// lifecycle's clock (or when parent ends).
func (l *Lifecycle) clockDeadline(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	timer := l.clock.After(d)
	go func() {
		select {
		case <-timer:
			cancel(ErrQuiesceTimeout)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// pause tells every writer of w to pause, in order, within qctx. It
// returns the writers it called (all of them must be resumed, even the one
// that failed) and the first error.
func pause(qctx context.Context, writers []Writer, w Workspace, p providers.Provider) ([]Writer, error) {
	var called []Writer
	for _, wr := range writers {
		called = append(called, wr)
		if err := wr.Pause(qctx, w, p); err != nil {
			return called, quiesceErr(qctx, fmt.Errorf("pausing %s: %w", wr.Name(), err))
		}
	}
	return called, nil
}

// quiesceErr turns a failure at the quiesce deadline into ErrQuiesceTimeout.
func quiesceErr(qctx context.Context, err error) error {
	if errors.Is(context.Cause(qctx), ErrQuiesceTimeout) {
		return fmt.Errorf("%w: %w", ErrQuiesceTimeout, err)
	}
	return err
}

// waitBrowsers waits until no browser holds a profile under dir (the
// profile package's lock checks), polling on the clock until qctx ends.
func (l *Lifecycle) waitBrowsers(qctx context.Context, dir string) error {
	profs, err := profile.Discover(dir)
	if err != nil {
		return err
	}
	for {
		var running error
		for _, pr := range profs {
			if err := profile.CheckRunning(pr); err != nil {
				running = err
				break
			}
		}
		if running == nil {
			return nil
		}
		select {
		case <-qctx.Done():
			return quiesceErr(qctx, running)
		case <-l.clock.After(l.cfg.QuiescePoll):
		}
	}
}

// resume resumes the writers in reverse order, on a context that is not
// cancelled with the capture's, and reports failures to the log.
func (l *Lifecycle) resume(ctx context.Context, called []Writer, w Workspace, p providers.Provider) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.ResumeTimeout)
	defer cancel()
	for i := len(called) - 1; i >= 0; i-- {
		if err := called[i].Resume(rctx, w, p); err != nil {
			l.log.Error("resuming a writer failed", "workspace", w.ID, "writer", called[i].Name(), "err", l.redact(err.Error()))
		}
	}
}
