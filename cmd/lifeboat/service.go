package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"lifeboat/config"
	"lifeboat/providers"
	"lifeboat/providers/docker"
	"lifeboat/providers/e2b"
	"lifeboat/providers/local"
	"lifeboat/providers/managedagents"
	"lifeboat/providers/ssh"
	"lifeboat/prune"
	"lifeboat/recovery"
	"lifeboat/repo"
	"lifeboat/server"
)

// service is what `lifeboat serve` runs over one repository and state
// store: the lifecycle, the recovery service, the maintenance schedule and
// the HTTP server, put together from the config.
type service struct {
	store   *recovery.Store
	life    *recovery.Lifecycle
	svc     *recovery.Service
	srv     *server.Server
	maint   *recovery.Maintenance
	metrics *server.Metrics
	events  *server.Events
	log     *slog.Logger
	lock    *repo.SharedLock // the repository lock the lifecycle's work shares
}

// serveLockJoin is how long the work of serve shares one shared
// repository lock (repo.SharedLock): a busy server writes a lock object
// about once per this, not twice per capture, and an exclusive locker in
// another process waits at most this long and the longest piece of work.
const serveLockJoin = 5 * time.Second

// newLogger is the server's log: text or JSON lines on stderr, at the
// configured level.
func (g *globalOptions) newLogger(c *config.Config) *slog.Logger {
	o := &slog.HandlerOptions{Level: c.Log.Level}
	if c.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(g.out.errw, o))
	}
	return slog.New(slog.NewTextHandler(g.out.errw, o))
}

// providerInstances builds the configured provider instances.
func providerInstances(c *config.Config) (map[string]providers.Provider, error) {
	out := map[string]providers.Provider{}
	for _, p := range c.Providers {
		pi, err := providerInstance(c, p)
		if err != nil {
			return nil, err
		}
		out[p.InstanceName()] = pi
	}
	return out, nil
}

// sshKey reads and parses an ssh provider's key_file.
func sshKey(p config.SSHProvider) (xssh.Signer, error) {
	b, err := os.ReadFile(p.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("reading key_file: %v", err)
	}
	defer clear(b)
	signer, err := xssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("key_file %s is not a usable private key (an unencrypted OpenSSH or PEM key is needed): %v", p.KeyFile, err)
	}
	return signer, nil
}

// providerInstance builds one configured provider instance.
func providerInstance(c *config.Config, p config.Provider) (providers.Provider, error) {
	switch p := p.(type) {
	case config.LocalProvider:
		return local.New(p.Root), nil
	case config.SSHProvider:
		signer, err := sshKey(p)
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		sp, err := ssh.New(ssh.Config{Addr: p.Addr(), User: p.User, Signers: []xssh.Signer{signer}, KnownHosts: p.KnownHosts, KeyFile: p.KeyFile,
			Root: p.Root, CacheDir: p.CacheDir})
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		return sp, nil
	case config.PlatformProvider:
		return platformProvider(c, p)
	case config.DockerProvider:
		dp, err := docker.New(docker.Config{Host: p.Host, CAFile: p.TLSCA, CertFile: p.TLSCert, KeyFile: p.TLSKey,
			Image: p.Image, Command: p.Command, Workdir: p.Workdir, Mounts: p.Mounts, Labels: p.Labels, Network: p.Network,
			CheckpointRepository: p.CheckpointRepository, CacheDir: p.CacheDir})
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		return dp, nil
	case config.E2BProvider:
		key, err := c.Secret(p.APIKey)
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		ep, err := e2b.New(e2b.Config{APIKey: key, BaseURL: p.BaseURL, SandboxURL: p.SandboxURL, Domain: p.Domain,
			Template: p.Template, SandboxTimeout: int(p.SandboxTimeout / time.Second), User: p.User,
			Workspace: p.Workspace, Timeout: p.Timeout, TransferTimeout: p.Transfer, ReadyTimeout: p.Ready, CacheDir: p.CacheDir})
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		return ep, nil
	case config.ManagedAgentsProvider:
		tok, err := c.Secret(p.Token)
		if err != nil {
			return nil, usageError{fmt.Sprintf("provider %s: %v", p.Name, err)}
		}
		return managedagents.New(managedagents.Config{Token: tok, BaseURL: p.BaseURL, Timeout: p.Timeout,
			CheckpointTimeout: p.CheckpointTimeout, Label: p.Label}), nil
	}
	return nil, fmt.Errorf("provider %s: type %s is not supported by this lifeboat", p.InstanceName(), p.Type())
}

// openService puts the service together over r; close releases it.
func (g *globalOptions) openService(c *config.Config, r *repo.Repository, tokens *server.Tokens, periodic bool) (s *service, err error) {
	if d := c.Prune.DeleteAfter; d < prune.MinDeleteAfter {
		return nil, usageError{fmt.Sprintf("[prune] delete_after %s: want at least %s (a capture's session limit, the condemn slack and an hour of clock difference)", d, prune.MinDeleteAfter)}
	}
	s = &service{log: g.newLogger(c), events: server.NewEvents()}
	built := s // the returns below give nil on an error
	defer func() {
		if err != nil {
			built.close()
		}
	}()
	instances, err := providerInstances(c)
	if err != nil {
		return nil, err
	}
	if s.store, err = openStateStore(c); err != nil {
		return nil, err
	}
	s.metrics = server.NewMetrics(server.MetricsSource{Logger: s.log})
	lock := g.lockOptions("serve")
	lock.OnWait = nil // the server's waits are logged by the work that waits
	s.lock = r.NewSharedLock(lock, serveLockJoin)
	overrides := map[string]recovery.Settings{}
	for _, o := range c.Workspaces {
		overrides[o.ID] = recovery.Settings{ParkInterval: o.ParkInterval, PeriodicInterval: o.PeriodicInterval}
	}
	// Retention after each capture, unless [retention] every schedules it
	// for every workspace at once (the maintenance's Retain).
	var retention recovery.Retention = recovery.RepoRetention{Repo: r, Default: c.Retention, Logger: s.log}
	if c.RetentionEvery > 0 {
		retention = nil
	}
	s.life, err = recovery.New(recovery.Config{Store: s.store, Capturer: &recovery.RepoCapturer{Repo: r}, Instances: instances,
		Overrides: overrides, Holds: &recovery.RepoHolds{Repo: r}, Retention: retention,
		RepoLock:     s.lock.Run,
		ParkInterval: c.Lifecycle.ParkInterval, NativeInterval: c.Lifecycle.NativeInterval, PeriodicInterval: c.Lifecycle.PeriodicInterval,
		PeriodicOff: !periodic || c.Lifecycle.PeriodicInterval == 0,
		MaxParallel: c.Lifecycle.MaxParallel, MaxChecks: c.Lifecycle.MaxChecks, QuiesceTimeout: c.Lifecycle.QuiesceTimeout, Logger: s.log,
		Redact:     recovery.RedactPatterns(c.Lifecycle.Redact...),
		OnReceipt:  func(rc recovery.Receipt) { s.events.Receipt(rc); s.metrics.Receipt(rc) },
		WatchFiles: true})
	if err != nil {
		return nil, err
	}
	for _, h := range c.Hooks {
		w := recovery.ExecWriter{Label: h.Name, PauseCommand: h.Pause, ResumeCommand: h.Resume, Timeout: h.Timeout}
		if h.Workspaces == nil {
			s.life.RegisterWriter("", w)
		}
		for _, ws := range h.Workspaces {
			s.life.RegisterWriter(ws, w)
		}
	}
	s.svc, err = recovery.NewService(recovery.ServiceConfig{Lifecycle: s.life, Restorer: &recovery.RepoRestorer{Repo: r},
		StateDir: c.State.Dir, CheckInterval: c.Lifecycle.CheckInterval, LeaseTTL: c.State.Lease, Logger: s.log, TestStep: recoveryStopHook()})
	if err != nil {
		return nil, err
	}
	// The API and its metrics read recovery through one seam.
	rec := server.NewRecovery(s.svc)
	s.metrics.SetSource(server.MetricsSource{Workspaces: rec, Operations: rec, Holds: rec, Logger: s.log})
	s.maint = &recovery.Maintenance{Repo: r, Default: c.Retention, MaxUnused: c.Prune.MaxUnused, Lock: lock, Logger: s.log,
		DeleteAfter: c.Prune.DeleteAfter, Now: pruneClock(),
		Observe: func(rep recovery.MaintenanceReport, err error) {
			s.metrics.Prune(rep.Prune, err)
			ev := map[string]any{"report": rep}
			if err != nil {
				ev["error"] = err.Error()
			}
			s.events.Publish("maintenance", "", ev)
		},
		ObserveRetention: func(rep recovery.MaintenanceReport, err error) {
			ev := map[string]any{"report": rep}
			if err != nil {
				ev["error"] = err.Error()
			}
			s.events.Publish("retention", "", ev)
		}}
	s.srv, err = server.New(server.Config{Recovery: rec, Tokens: tokens,
		Events: s.events, Logger: s.log, Policies: recovery.RepoPolicies{Repo: r, Lock: lock},
		Maintenance: maintainer{s.maint}, Metrics: s.metrics,
		Timeouts: server.Timeouts{Read: c.Server.ReadTimeout, Write: c.Server.WriteTimeout, Idle: c.Server.IdleTimeout}})
	return s, err
}

// openStateStore opens the state store [state] names: PostgreSQL at url
// (its password from password_file or password_env), else the embedded
// store in dir.
func openStateStore(c *config.Config) (*recovery.Store, error) {
	pw, err := c.StatePassword()
	if err != nil {
		return nil, usageError{err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Each capture in flight holds a connection (its workspace's lock),
	// and while it promotes its snapshot another (the workspace's hold
	// lock) and a third for the transaction; a check whose finding changes
	// the workspace's hold takes two (the hold lock and a read).
	conns := int32(max(32, 3*c.Lifecycle.MaxParallel+2*c.Lifecycle.MaxChecks+8))
	return recovery.OpenStoreAt(ctx, recovery.StoreOptions{Dir: c.State.Dir, URL: c.State.URL, Password: string(pw), MaxConns: conns})
}

// maintainer is the server's view of the maintenance.
type maintainer struct{ m *recovery.Maintenance }

func (m maintainer) Maintain(ctx context.Context) (any, error) { return m.m.Maintain(ctx) }

// close releases what openService made, in reverse order.
func (s *service) close() {
	if s.srv != nil {
		s.srv.Close()
	}
	if s.svc != nil {
		s.svc.Close()
	}
	if s.life != nil {
		s.life.Close()
	}
	if s.store != nil {
		_ = s.store.Close()
	}
}
