package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Name is this adapter's name in errors and configuration.
const Name = "docker"

// Labels Lifeboat puts on what it creates.
const (
	LabelManaged    = "lifeboat.managed"     // "true" on every container Create or Rollback made
	LabelKey        = "lifeboat.instance"    // the name derived from the idempotency key
	LabelCheckpoint = "lifeboat.checkpoint"  // on checkpoint images: the container they were taken of
	LabelRollback   = "lifeboat.rollback-of" // on a container made by Rollback: the checkpoint
)

const (
	metaDir      = "/.lifeboat"
	stagingDir   = metaDir + "/staging"
	switchingDir = metaDir + "/switching"
)

// Config says how to reach the daemon and how instances are made.
type Config struct {
	// Host is the daemon's address: unix:///path/to/docker.sock or
	// tcp://host:port (tcp needs TLS: CAFile, CertFile and KeyFile).
	Host                      string
	CAFile, CertFile, KeyFile string
	// Image is what Create starts a container from when CreateSpec.Template
	// is empty.
	Image string
	// Command overrides the image's command (the container's main
	// process must keep running: e.g. ["sleep", "infinity"]).
	Command []string
	// Workdir is the absolute workspace directory inside a container
	// (default /workspace).
	Workdir string
	// Mounts are bind mounts for created containers, "SRC:DST[:ro]" as
	// docker run -v takes them. Files under a mount are not part of the
	// container's filesystem, so a native checkpoint does not hold them.
	Mounts []string
	// Labels are put on every created container, beside Lifeboat's own.
	Labels map[string]string
	// Network is the network mode of created containers ("" = the
	// daemon's default, "none" = no network).
	Network string
	// CheckpointRepository names checkpoint images (default
	// "lifeboat-checkpoint").
	CheckpointRepository string
	// CacheDir is the local directory for ReadFiles mirrors.
	CacheDir string
	// Timeout bounds each call to the daemon that has no deadline of its
	// own (default 60 s).
	Timeout time.Duration
}

// Provider keeps workspace instances as containers of one Docker daemon.
type Provider struct {
	cfg Config
	cli *client.Client
	now func() time.Time
	// sameClock: the daemon is on this machine (a unix socket), so file
	// mtimes in its archives are on our clock and ReadFiles can keep
	// unchanged files of a mirror (see racyWindow).
	sameClock bool

	locks keylock.Map[providers.InstanceID] // instance -> held while its mirror is in use (ReadFiles to Files.Close)
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.Stopper       = (*Provider)(nil)
	_ providers.CapturePauser = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New checks cfg and returns a Provider. Nothing is dialled yet: the API
// version is negotiated on the first call.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.Host)
	switch {
	case cfg.Host == "":
		return nil, errors.New("docker provider: Host is required (unix:///var/run/docker.sock or tcp://host:2376)")
	case err != nil:
		return nil, fmt.Errorf("docker provider: host %q: %w", cfg.Host, err)
	case u.Scheme == "unix" && u.Path == "":
		return nil, fmt.Errorf("docker provider: host %q names no socket path", cfg.Host)
	case u.Scheme == "tcp" && (cfg.CAFile == "" || cfg.CertFile == "" || cfg.KeyFile == ""):
		return nil, fmt.Errorf("docker provider: host %q is tcp: set tls_ca, tls_cert and tls_key (a daemon reached over TCP without TLS gives root to anyone on the network)", cfg.Host)
	case u.Scheme != "unix" && u.Scheme != "tcp":
		return nil, fmt.Errorf("docker provider: host %q: want unix:///path or tcp://host:port", cfg.Host)
	case cfg.CacheDir == "":
		return nil, errors.New("docker provider: CacheDir (local mirror directory) is required")
	}
	if cfg.Workdir == "" {
		cfg.Workdir = "/workspace"
	}
	if !path.IsAbs(cfg.Workdir) || path.Clean(cfg.Workdir) == "/" || strings.HasPrefix(path.Clean(cfg.Workdir), metaDir) {
		return nil, fmt.Errorf("docker provider: workdir %q must be an absolute directory other than / and outside %s", cfg.Workdir, metaDir)
	}
	cfg.Workdir = path.Clean(cfg.Workdir)
	if cfg.CheckpointRepository == "" {
		cfg.CheckpointRepository = "lifeboat-checkpoint"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 60 * time.Second
	}
	opts := []client.Opt{client.WithHost(cfg.Host), client.WithAPIVersionNegotiation()}
	if u.Scheme == "tcp" {
		opts = append(opts, client.WithTLSClientConfig(cfg.CAFile, cfg.CertFile, cfg.KeyFile))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker provider: %w", err)
	}
	return &Provider{cfg: cfg, cli: cli, now: time.Now, sameClock: u.Scheme == "unix"}, nil
}

// Close releases the client's idle connections.
func (p *Provider) Close() error { return p.cli.Close() }

// APIVersion asks the daemon (negotiating when not done yet) and returns
// the API version this provider speaks with it.
func (p *Provider) APIVersion(ctx context.Context) (string, error) {
	if _, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return "", wrap("ping", "", err)
	}
	return p.cli.ClientVersion(), nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider: everything. BrowserProfile
// stays false: a profile in the workspace is captured as files like any
// other, with the container paused.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, NativeCheckpoints: true, Pause: true, Exec: true, Create: true}
}

// Workdir is the workspace directory inside each container.
func (p *Provider) Workdir() string { return p.cfg.Workdir }

func checkID(op string, id providers.InstanceID) error {
	if !providers.ValidName(string(id)) {
		return newErr(op, id, providers.KindInvalid, "instance id %q is not a container id or name (letters, digits, '.', '_', '-', at most %d bytes)", string(id), providers.MaxNameLen)
	}
	return nil
}

// bound gives ctx the provider's timeout when it has no deadline.
func (p *Provider) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.cfg.Timeout)
}

// inspect returns the container; (nil, nil) only for the daemon's
// confirmed "No such container".
func (p *Provider) inspect(ctx context.Context, op string, id providers.InstanceID) (*container.InspectResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap(op, id, err)
	}
	res, err := p.cli.ContainerInspect(ctx, string(id), client.ContainerInspectOptions{})
	if err != nil {
		if noSuchContainer(err) {
			return nil, nil
		}
		return nil, wrap(op, id, ctxErr(ctx, err))
	}
	return &res.Container, nil
}

// needContainer is inspect for the data plane: an absent container is
// KindConflict (only Inspect says Missing).
func (p *Provider) needContainer(ctx context.Context, op string, id providers.InstanceID) (*container.InspectResponse, error) {
	c, err := p.inspect(ctx, op, id)
	if err == nil && c == nil {
		err = newErr(op, id, providers.KindConflict, "container %s does not exist on %s (Inspect confirms whether it is missing)", id, p.cfg.Host)
	}
	return c, err
}

// needRunning is needContainer for calls that exec in the container.
func (p *Provider) needRunning(ctx context.Context, op string, id providers.InstanceID) error {
	c, err := p.needContainer(ctx, op, id)
	if err != nil {
		return err
	}
	if c.State == nil || !c.State.Running || c.State.Paused {
		return newErr(op, id, providers.KindConflict, "container %s is %s, not running: start it (or wait for a capture to resume it)", id, stateName(c))
	}
	return nil
}

func stateName(c *container.InspectResponse) string {
	if c.State == nil {
		return "in an unknown state"
	}
	return string(c.State.Status)
}

// Inspect implements providers.Provider: Running for a running container,
// Stopped for a created, paused, exited or dead one, Missing only when the
// daemon answered 404 "No such container".
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	if err := checkID(op, id); err != nil {
		return providers.Status{}, err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	c, err := p.inspect(ctx, op, id)
	if err != nil {
		return providers.Status{}, err
	}
	now := p.now()
	if c == nil {
		return providers.Status{State: providers.Missing, Instance: id, ObservedAt: now,
			Detail: fmt.Sprintf("the daemon at %s has no container %s", p.cfg.Host, id)}, nil
	}
	st := providers.Status{State: providers.Stopped, Instance: id, ObservedAt: now}
	s := c.State
	switch {
	case s != nil && s.Running && !s.Paused:
		st.State = providers.Running
		st.Detail = fmt.Sprintf("container %s running since %s", strings.TrimPrefix(c.Name, "/"), s.StartedAt)
	case s != nil && s.Paused:
		st.Detail = fmt.Sprintf("container %s is paused", strings.TrimPrefix(c.Name, "/"))
	case s != nil:
		st.Detail = fmt.Sprintf("container %s is %s (exit code %d, finished at %s)", strings.TrimPrefix(c.Name, "/"), s.Status, s.ExitCode, s.FinishedAt)
	default:
		st.Detail = "container " + strings.TrimPrefix(c.Name, "/")
	}
	return st, nil
}

// containerName is the name Create gives the container of an idempotency
// key.
func containerName(key string) string { return "lifeboat-" + providers.KeyedName(key) }

// Create implements providers.Provider: a container named after the
// idempotency key (so a retried Create, from any process, finds the one
// the first made), from CreateSpec.Template or Config.Image, with the
// configured command, mounts, network and labels plus Lifeboat's
// (lifeboat.managed=true, lifeboat.instance) and the spec's; started, with
// the workspace directory made. It returns the container id.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	key := spec.IdempotencyKey
	if key == "" {
		key = "random:" + randHex(16)
	}
	img := spec.Template
	if img == "" {
		img = p.cfg.Image
	}
	if img == "" {
		return "", newErr(op, "", providers.KindInvalid, "no image: set the provider's image or give a template")
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	labels := map[string]string{}
	maps.Copy(labels, p.cfg.Labels)
	maps.Copy(labels, spec.Labels)
	labels[LabelManaged] = "true"
	labels[LabelKey] = providers.KeyedName(key)
	return p.makeContainer(ctx, op, containerName(key), img, labels)
}

// makeContainer creates (or finds, by name) and starts a container of
// img and makes sure the workspace directory exists in it.
func (p *Provider) makeContainer(ctx context.Context, op, name, img string, labels map[string]string) (providers.InstanceID, error) {
	if err := ctx.Err(); err != nil {
		return "", wrap(op, "", err)
	}
	cfg := &container.Config{Image: img, Labels: labels, WorkingDir: p.cfg.Workdir}
	if len(p.cfg.Command) > 0 {
		cfg.Cmd = p.cfg.Command
	}
	hc := &container.HostConfig{Binds: p.cfg.Mounts}
	if p.cfg.Network != "" {
		hc.NetworkMode = container.NetworkMode(p.cfg.Network)
	}
	var id providers.InstanceID
	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc})
	switch {
	case err == nil:
		id = providers.InstanceID(res.ID)
	case isConflict(err):
		// Made by an earlier call with the same key: use that one.
		c, ierr := p.byName(ctx, op, name)
		if ierr != nil {
			return "", ierr
		}
		if c == nil {
			return "", wrap(op, "", err)
		}
		if c.Config == nil || c.Config.Labels[LabelManaged] != "true" {
			return "", newErr(op, providers.InstanceID(name), providers.KindConflict, "a container named %s exists that Lifeboat did not create; rename or remove it", name)
		}
		id = providers.InstanceID(c.ID)
	case noSuchImage(err):
		return "", newErr(op, "", providers.KindInvalid, "image %s is not on the daemon at %s: pull or load it first (Lifeboat never pulls): %v", img, p.cfg.Host, err)
	default:
		return "", wrap(op, "", ctxErr(ctx, err))
	}
	if _, err := p.cli.ContainerStart(ctx, string(id), client.ContainerStartOptions{}); err != nil {
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	if err := p.ensureWorkdir(ctx, op, id); err != nil {
		return "", err
	}
	return id, nil
}

// byName inspects the container a conflicting create named. The daemon
// reserves a name before the container can be inspected, so a concurrent
// create may briefly find nothing: it asks again for up to 10 s.
func (p *Provider) byName(ctx context.Context, op, name string) (*container.InspectResponse, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := p.inspect(ctx, op, providers.InstanceID(name))
		if err != nil || c != nil || time.Now().After(deadline) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, wrap(op, "", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ensureWorkdir makes the workspace directory (and /.lifeboat) in the
// container through the archive endpoint when it is not there.
func (p *Provider) ensureWorkdir(ctx context.Context, op string, id providers.InstanceID) error {
	_, err := p.cli.ContainerStatPath(ctx, string(id), client.ContainerStatPathOptions{Path: p.cfg.Workdir})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return wrap(op, id, ctxErr(ctx, err))
	}
	dirs := []string{}
	for d := p.cfg.Workdir; d != "/"; d = path.Dir(d) {
		dirs = append([]string{strings.TrimPrefix(d, "/")}, dirs...)
	}
	_, err = p.cli.CopyToContainer(ctx, string(id), client.CopyToContainerOptions{DestinationPath: "/", Content: dirsTar(dirs, 0o755)})
	return wrap(op, id, ctxErr(ctx, err))
}

// Destroy implements providers.Provider: the container is removed with
// its anonymous volumes (force: a running one is killed), and so is its
// local mirror; an absent one is fine. When the container ran from a
// checkpoint image whose tag was already deleted, that image goes too.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	const op = "destroy"
	if err := checkID(op, id); err != nil {
		return err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	c, err := p.inspect(ctx, op, id)
	if err != nil {
		return err
	}
	if c == nil {
		p.dropMirror(id)
		return nil
	}
	if _, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !noSuchContainer(err) {
		return wrap(op, id, ctxErr(ctx, err))
	}
	p.dropMirror(id)
	p.dropDanglingCheckpoint(ctx, c.Image)
	return nil
}

// dropDanglingCheckpoint removes a checkpoint image that has no tag left
// (DeleteCheckpoint untagged it while a container still ran from it);
// failures are ignored: the image is then one `docker image prune` finds.
func (p *Provider) dropDanglingCheckpoint(ctx context.Context, image string) {
	if image == "" {
		return
	}
	img, err := p.cli.ImageInspect(ctx, image)
	if err != nil || len(img.RepoTags) > 0 || img.Config == nil || img.Config.Labels[LabelCheckpoint] == "" {
		return
	}
	_, _ = p.cli.ImageRemove(ctx, img.ID, client.ImageRemoveOptions{PruneChildren: true})
}

// Stop implements providers.Stopper: the container is stopped (SIGTERM,
// then SIGKILL after 10 s); its filesystem stays, Inspect reports it
// Stopped, ReadFiles still works. Stopping a stopped container is not an
// error; a missing one is KindConflict.
func (p *Provider) Stop(ctx context.Context, id providers.InstanceID) error {
	return p.onContainer(ctx, "stop", id, func(ctx context.Context, _ *container.InspectResponse) error {
		timeout := 10
		_, err := p.cli.ContainerStop(ctx, string(id), client.ContainerStopOptions{Timeout: &timeout})
		if noSuchContainer(err) {
			return newErr("stop", id, providers.KindConflict, "container %s disappeared while stopping it (Inspect confirms whether it is missing)", id)
		}
		return err
	})
}

// onContainer runs fn on the existing container id, within the provider's
// timeout; an absent container is KindConflict, and fn's error is
// wrapped.
func (p *Provider) onContainer(ctx context.Context, op string, id providers.InstanceID, fn func(context.Context, *container.InspectResponse) error) error {
	if err := checkID(op, id); err != nil {
		return err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	c, err := p.needContainer(ctx, op, id)
	if err != nil {
		return err
	}
	return wrap(op, id, ctxErr(ctx, fn(ctx, c)))
}

// Pause implements providers.Pauser: every process of the container is
// frozen (cgroup freezer). Pausing a paused container is not an error.
func (p *Provider) Pause(ctx context.Context, id providers.InstanceID) error {
	return p.onContainer(ctx, "pause", id, func(ctx context.Context, c *container.InspectResponse) error {
		if c.State == nil || c.State.Paused || !c.State.Running {
			return nil // paused already, or nothing runs: nothing writes
		}
		_, err := p.cli.ContainerPause(ctx, string(id), client.ContainerPauseOptions{})
		return err
	})
}

// PausedFilesReadable implements providers.CapturePauser: the archive
// endpoint and commit work on a paused container.
func (p *Provider) PausedFilesReadable() bool { return true }

// Resume implements providers.Pauser: a paused container is thawed; one
// that is not paused is left as it is.
func (p *Provider) Resume(ctx context.Context, id providers.InstanceID) error {
	return p.onContainer(ctx, "resume", id, func(ctx context.Context, c *container.InspectResponse) error {
		if c.State == nil || !c.State.Paused {
			return nil
		}
		_, err := p.cli.ContainerUnpause(ctx, string(id), client.ContainerUnpauseOptions{})
		return err
	})
}

// mirrorDir is the local mirror of an instance.
func (p *Provider) mirrorDir(id providers.InstanceID) string {
	return filepath.Join(p.cfg.CacheDir, string(id))
}

// dropMirror removes the local mirror of a destroyed instance unless a
// ReadFiles still holds it.
func (p *Provider) dropMirror(id providers.InstanceID) {
	p.locks.IfUnlocked(id, func() {
		if r, err := os.OpenRoot(p.cfg.CacheDir); err == nil {
			_ = r.Remove(syncStateName(string(id)))
			_ = fsmeta.RemoveTree(r, string(id))
			r.Close()
		}
	})
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
