package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery"
	"lifeboat/repo"
)

// openState opens the lifecycle state store named by --state-dir, or the
// PostgreSQL one --config names ([state] url).
func (g *globalOptions) openState() (*recovery.Store, error) {
	if g.stateDir == "" {
		return nil, usageError{"no state store: pass --state-dir or set LIFEBOAT_STATE_DIR (workspaces and their checkpoints are recorded there)"}
	}
	if g.cfg != nil && g.cfg.State.URL != "" && g.stateDir == g.cfg.State.Dir {
		return openStateStore(g.cfg)
	}
	return recovery.OpenStore(g.stateDir)
}

// withState opens the state store, runs fn with it and closes it.
func (g *globalOptions) withState(fn func(s *recovery.Store) error) error {
	s, err := g.openState()
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

// providers returns the providers this invocation can reach.
func (g *globalOptions) providers() []providers.Provider {
	var out []providers.Provider
	if g.localRoot != "" {
		out = append(out, local.New(g.localRoot))
	}
	return out
}

// provider returns the configured provider called name.
func (g *globalOptions) provider(name string) (providers.Provider, error) {
	for _, p := range g.providers() {
		if p.Name() == name {
			return p, nil
		}
	}
	if name == local.Name {
		return nil, usageError{"the local provider needs its root: pass --local-root or set LIFEBOAT_LOCAL_ROOT"}
	}
	return nil, usageError{fmt.Sprintf("provider %q cannot be used from the command line (only %q)", name, local.Name)}
}

// withLifecycle opens the state store, then the repository under a shared
// lock, and runs fn with a Lifecycle over them.
func (g *globalOptions) withLifecycle(ctx context.Context, command string, fn func(l *recovery.Lifecycle) error) error {
	return g.withCapturingLifecycle(ctx, command, &recovery.RepoCapturer{}, fn)
}

// withCapturingLifecycle is withLifecycle whose captures are c's (its
// named profiles, its discovery) into the repository opened.
func (g *globalOptions) withCapturingLifecycle(ctx context.Context, command string, c *recovery.RepoCapturer, fn func(l *recovery.Lifecycle) error) error {
	return g.withState(func(st *recovery.Store) error {
		return g.withLockedRepo(ctx, repo.LockShared, command, func(r *repo.Repository, _ *repo.Lock) error {
			c.Repo = r
			log := slog.New(slog.NewTextHandler(g.out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
			l, err := recovery.New(recovery.Config{Store: st, Capturer: c, Providers: g.providers(),
				Retention: recovery.RepoRetention{Repo: r, Logger: log}, Holds: &recovery.RepoHolds{Repo: r}, Logger: log})
			if err != nil {
				return err
			}
			defer l.Close()
			return fn(l)
		})
	})
}

type receiptMessage struct {
	MessageType string `json:"message_type"` // "capture_receipt"
	recovery.Receipt
}

// emitReceipt prints a capture receipt and returns the error that decides
// the exit code: none for captured, throttled and unchanged.
func (g *globalOptions) emitReceipt(r recovery.Receipt) error {
	g.out.emit(receiptMessage{"capture_receipt", r}, func(w io.Writer) {
		switch r.Outcome {
		case recovery.Captured:
			fmt.Fprintf(w, "workspace %s: captured snapshot %s (%s), now its last good checkpoint\n", r.Workspace, short(r.Snapshot), r.Reason)
		case recovery.Throttled:
			fmt.Fprintf(w, "workspace %s: not captured, the last good checkpoint %s is younger than the park interval\n", r.Workspace, short(r.LastGood))
		default:
			fmt.Fprintf(w, "workspace %s: %s; the last good checkpoint is still %s\n", r.Workspace, r.Outcome, orNone(short(r.LastGood)))
		}
		if r.Native != "" {
			fmt.Fprintf(w, "native checkpoint %s taken\n", r.Native)
		}
		for _, p := range r.Prefixes {
			fmt.Fprintf(w, "note: %s kept growing while it was read: captured as a verified prefix\n", quoteName(p))
		}
		if r.NativeError != "" {
			fmt.Fprintf(w, "warning: native checkpoint not taken: %s\n", r.NativeError)
		}
		if r.RetentionError != "" {
			fmt.Fprintf(w, "warning: retention failed: %s\n", r.RetentionError)
		}
	})
	return receiptExitError(r)
}

// receiptExitError is the error that gives receipt r's exit code: none
// for captured, throttled and unchanged.
func receiptExitError(r recovery.Receipt) error {
	switch r.Outcome {
	case recovery.Captured, recovery.Throttled, recovery.Unchanged:
		return nil
	case recovery.Partial:
		return partialError{max(r.Problems, 1)}
	}
	if r.Err != nil {
		return r.Err
	}
	// A receipt from a server carries its error as text: its outcome
	// gives the exit code.
	switch r.Outcome {
	case recovery.QuiesceTimeout:
		return receiptError(recovery.ErrQuiesceTimeout, r.Error)
	case recovery.Refused:
		// Refused for a lost or recovering workspace (21), or, on a
		// provider without file access, the portable capture after the
		// native checkpoint (1, as without a server).
		switch {
		case strings.Contains(r.Error, recovery.ErrLost.Error()):
			return receiptError(recovery.ErrLost, r.Error)
		case strings.Contains(r.Error, recovery.ErrRecovering.Error()):
			return receiptError(recovery.ErrRecovering, r.Error)
		}
	case recovery.Cancelled:
		return receiptError(context.Canceled, r.Error)
	}
	return errors.New(r.Error)
}

// receiptError is a server receipt's error text as an error that is
// sentinel (for the exit code): the text alone when it already says what
// sentinel says, else sentinel's words before it.
func receiptError(sentinel error, text string) error {
	if strings.Contains(text, sentinel.Error()) {
		return textError{text, sentinel}
	}
	return fmt.Errorf("%w: %s", sentinel, text)
}

// textError reads as text and unwraps to err.
type textError struct {
	text string
	err  error
}

func (e textError) Error() string { return e.text }
func (e textError) Unwrap() error { return e.err }

func short(id string) string {
	if len(id) > 16 {
		return id[:16]
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
