package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/config"
	"lifeboat/repo"
	"lifeboat/server"
)

type serveOptions struct {
	periodic bool
}

type servingMessage struct {
	MessageType string `json:"message_type"` // "serving"
	Address     string `json:"address"`
	URL         string `json:"url"`
}

// serveKeys maps serve's own flags onto config keys.
var serveKeys = map[string]string{"listen": "server.listen", "tokens": "server.tokens_file"}

func newServeCommand(g *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [--config FILE]",
		Short: "Serve the HTTP API and the status page",
		Long: "Serve the HTTP JSON API (docs/openapi.yaml), the status page and GET /metrics over the workspaces of the state store " +
			"and the repository, as the config file says (docs/configuration.md; flags and environment variables override it). " +
			"Every API request needs a bearer token whose hash is in the tokens file (lines `user|operator sha256:<hex> [label]`; " +
			"see docs/server.md). Periodic captures, loss detection and the prune schedule run in the background. The repository " +
			"is locked only around each piece of work, so `lifeboat prune` from another process works beside it. SIGTERM or " +
			"SIGINT shuts down gracefully: event streams end, requests in progress finish, captures in flight are cancelled and " +
			"recorded, and the command exits with 0.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.serveConfig(cmd)
			if err != nil {
				return err
			}
			return g.serve(cmd.Context(), c, o)
		},
	}
	f := cmd.Flags()
	f.String("listen", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one); config server.listen")
	f.String("tokens", "", "token file: one `user|operator sha256:<hex> [label]` per line; config server.tokens_file")
	f.BoolVar(&o.periodic, "periodic", true, "run periodic captures of running workspaces (false: only park, capture now and the API)")
	return cmd
}

// serveConfig loads the service's configuration: --config (optional),
// the environment, then the flags.
func (g *globalOptions) serveConfig(cmd *cobra.Command) (*config.Config, error) {
	extra := map[string]string{}
	for k, v := range serveKeys {
		extra[k] = v
	}
	if g.configPath == "" && !cmd.Flags().Changed("password-file") && os.Getenv("LIFEBOAT_PASSWORD_FILE") == "" && os.Getenv("LIFEBOAT_PASSWORD") != "" {
		g.sets = append([]string{"repository.password_env=LIFEBOAT_PASSWORD"}, g.sets...)
	}
	c, err := g.loadConfig(cmd, g.configPath, extra)
	if err != nil {
		return nil, err
	}
	g.cfg = c
	g.repo, g.cacheDir, g.keyHint, g.stateDir = c.Repository.Location, c.Repository.CacheDir, c.Repository.KeyHint, c.State.Dir
	g.passwordFile = c.Repository.PasswordFile
	return c, nil
}

// serve runs until ctx ends (SIGTERM, SIGINT), then shuts down gracefully.
func (g *globalOptions) serve(ctx context.Context, c *config.Config, o *serveOptions) error {
	tokens, err := server.LoadTokens(c.Server.TokensFile)
	if err != nil {
		return usageError{err.Error()}
	}
	// The repository (its key unlocked once, kept in memory), the
	// lifecycle and the recovery service outlive ctx: they are closed
	// after the HTTP server has shut down.
	g.serving = true
	stopped := false
	err = g.withRepo(context.WithoutCancel(ctx), true, func(r *repo.Repository) error {
		s, err := g.openService(c, r, tokens, o.periodic)
		if err != nil {
			return err
		}
		defer s.close()
		err = g.listenAndServe(ctx, c, o, s)
		stopped = err == nil
		return err
	})
	if err != nil && stopped {
		// Stopped gracefully, then closing the repository failed: storing
		// the packs still open (no stored checkpoint needs them: every
		// capture flushes before its snapshot is stored) or closing the
		// local index. Logged; the stop stands (exit 0).
		g.newLogger(c).Error("closing the repository after the stop", "err", err)
		return nil
	}
	return err
}

func (g *globalOptions) listenAndServe(ctx context.Context, c *config.Config, o *serveOptions, s *service) error {
	ln, err := net.Listen("tcp", c.Server.Listen)
	if err != nil {
		hint := "set [server] listen to an address of this host"
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another process listens there: stop it, or set [server] listen to another address"
		}
		return usageError{fmt.Sprintf("cannot listen on %s (server.listen): %v; %s", c.Server.Listen, err, hint)}
	}
	// The server's timeouts ([server] read_timeout, write_timeout,
	// idle_timeout) close slow and idle connections; the event stream is
	// exempt from the write deadline (server.Timeouts).
	hs := s.srv.HTTPServer()
	hs.RegisterOnShutdown(s.srv.Close)
	addr := servingAddr(c.Server.Listen, ln.Addr().String())
	scheme := "http"
	if c.Server.TLS() {
		scheme = "https"
	}
	url := scheme + "://" + addr + "/"
	g.out.emit(servingMessage{"serving", addr, url}, func(w io.Writer) {
		fmt.Fprintf(w, "lifeboat serve: listening on %s\n", url)
	})
	served := make(chan error, 1)
	go func() {
		if c.Server.TLS() {
			served <- hs.ServeTLS(ln, c.Server.TLSCert, c.Server.TLSKey)
		} else {
			served <- hs.Serve(ln)
		}
	}()
	// Recovery: continue the operations a previous serve left, hold what
	// each workspace needs in the repository, inspect every workspace once
	// now, then on the schedule until shutdown.
	s.svc.Resume(ctx)
	if err := s.life.SyncHolds(ctx); err != nil {
		s.log.Error("recording the workspaces' holds in the repository", "err", err)
	}
	var jobs []chan error
	start := func(fn func() error) {
		ch := make(chan error, 1)
		jobs = append(jobs, ch)
		go func() { ch <- fn() }()
	}
	start(func() error { s.svc.CheckDue(ctx); return s.svc.Run(ctx) })
	if o.periodic && c.Lifecycle.PeriodicInterval > 0 {
		start(func() error { return s.life.Run(ctx) })
	}
	if c.RetentionEvery > 0 {
		start(func() error { return s.maint.RunRetention(ctx, c.RetentionEvery, nil) })
	}
	if c.Prune.Every > 0 {
		start(func() error { return s.maint.Run(ctx, c.Prune.Every, nil) })
	}
	select {
	case err := <-served:
		return fmt.Errorf("serving on %s: %w", addr, err)
	case <-ctx.Done():
	}
	if c.Server.ShutdownGrace > 0 {
		// No new request is taken from now on; those in progress, and
		// the captures in flight, get the grace to finish.
		gctx, gcancel := context.WithTimeout(context.Background(), c.Server.ShutdownGrace)
		if err := errors.Join(hs.Shutdown(gctx), s.life.Drain(gctx)); err != nil {
			s.log.Warn("the shutdown grace ended; cancelling what is still in progress", "grace", c.Server.ShutdownGrace)
		}
		gcancel()
	}
	// Captures in flight end cancelled now, also those an API request
	// joined: its handler, which the shutdown below waits for, waits for
	// its capture.
	s.life.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = hs.Shutdown(sctx)
	for _, ch := range jobs {
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

// servingAddr is the address serve says it listens on: the host as
// configured with the port the listener got (Go reports a listener on
// 0.0.0.0 as [::]), or the listener's own address when no host was given.
func servingAddr(listen, actual string) string {
	host, _, err := net.SplitHostPort(listen)
	_, port, aerr := net.SplitHostPort(actual)
	if err != nil || aerr != nil || host == "" {
		return actual
	}
	return net.JoinHostPort(host, port)
}
