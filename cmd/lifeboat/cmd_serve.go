package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/recovery"
	"lifeboat/repo"
	"lifeboat/server"
)

type serveOptions struct {
	listen   string
	tokens   string
	periodic bool
}

type servingMessage struct {
	MessageType string `json:"message_type"` // "serving"
	Address     string `json:"address"`
	URL         string `json:"url"`
}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR --tokens FILE",
		Short: "Serve the HTTP API and the status page",
		Long: "Serve the HTTP JSON API (docs/openapi.yaml) and the status page over the lifecycle in --state-dir and the repository: " +
			"workspaces, checkpoints, park, recovery, repair holds and an event stream. Every API request needs a bearer token whose " +
			"hash is in the --tokens file (lines `user|operator sha256:<hex> [label]`; see docs/server.md). Periodic captures run in " +
			"the background. SIGTERM or SIGINT shuts down gracefully: event streams end, requests in progress finish, captures in " +
			"flight are cancelled and recorded, and the command exits with 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.serve(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	f.StringVar(&o.tokens, "tokens", "", "token file: one `user|operator sha256:<hex> [label]` per line (required)")
	f.BoolVar(&o.periodic, "periodic", true, "run periodic captures of running workspaces")
	return cmd
}

// serve runs until ctx ends (SIGTERM, SIGINT), then shuts down gracefully.
func (g *globalOptions) serve(ctx context.Context, o *serveOptions) error {
	if o.tokens == "" {
		return usageError{"serve needs --tokens FILE: lines `user|operator sha256:<hash of the token> [label]` (see docs/server.md)"}
	}
	tokens, err := server.LoadTokens(o.tokens)
	if err != nil {
		return usageError{err.Error()}
	}
	events := server.NewEvents()
	logger := slog.New(slog.NewTextHandler(g.out.errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The repository, the lifecycle and the recovery service outlive ctx:
	// they are closed after the HTTP server has shut down.
	return g.withLifecycleRepo(context.WithoutCancel(ctx), "serve", func(c *recovery.Config) { c.OnReceipt = events.Receipt },
		func(l *recovery.Lifecycle, r *repo.Repository) error {
			svc, err := recovery.NewService(recovery.ServiceConfig{Lifecycle: l, Restorer: &recovery.RepoRestorer{Repo: r},
				StateDir: g.stateDir, Logger: logger, TestStep: recoveryStopHook()})
			if err != nil {
				return err
			}
			defer svc.Close()
			srv, err := server.New(server.Config{Lifecycle: l, Recovery: server.NewRecoveryAdapter(svc), Tokens: tokens,
				Events: events, Logger: logger})
			if err != nil {
				return err
			}
			return g.listenAndServe(ctx, o, srv, l, svc)
		})
}

func (g *globalOptions) listenAndServe(ctx context.Context, o *serveOptions, srv *server.Server, l *recovery.Lifecycle, svc *recovery.Service) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return usageError{fmt.Sprintf("cannot listen on --listen %s: %v", o.listen, err)}
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Close)
	addr := ln.Addr().String()
	g.out.emit(servingMessage{"serving", addr, "http://" + addr + "/"}, func(w io.Writer) {
		fmt.Fprintf(w, "lifeboat serve: listening on http://%s/\n", addr)
	})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// Recovery: continue the operations a previous serve left, inspect
	// every workspace once now, then on the schedule until shutdown.
	svc.Resume(ctx)
	checks := make(chan error, 1)
	go func() {
		svc.CheckDue(ctx)
		checks <- svc.Run(ctx)
	}()
	periodic := make(chan error, 1)
	if o.periodic {
		go func() { periodic <- l.Run(ctx) }()
	} else {
		periodic <- nil
	}
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	for _, ch := range []chan error{periodic, checks} {
		if perr := <-ch; perr != nil && !errors.Is(perr, context.Canceled) {
			err = errors.Join(err, perr)
		}
	}
	if err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	g.out.note("lifeboat serve: stopped")
	return nil
}
