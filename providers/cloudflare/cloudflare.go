package cloudflare

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
	"lifeboat/providers/httpapi"
)

// Name is this adapter's name.
const Name = "cloudflare"

// DefaultWorkspace is the workspace directory in a sandbox (the SDK's
// default working directory).
const DefaultWorkspace = "/workspace"

// statusTable maps the bridge's answers; 404 is Missing for Inspect only;
// 409 CONTAINER_DISK_LOST is the data plane of a lost sandbox; 503
// CONTAINER_UNAVAILABLE (the work did not run) is an outage.
var statusTable = httpapi.Statuses(nil)

// Config says how to reach the bridge.
type Config struct {
	Token     string // the bridge's bearer token (a secret)
	BaseURL   string // the Worker's URL (required)
	Workspace string // default DefaultWorkspace
	CacheDir  string // local mirrors (required)
	Timeout   time.Duration
}

// Provider is one bridge Worker.
type Provider struct {
	boxfiles.Files
	c, d httpapi.Client
	cfg  Config
	now  func() time.Time
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("cloudflare: the bridge's base URL is required")
	}
	p := &Provider{cfg: cfg, now: time.Now}
	if err := p.Files.Init(Name, box{p}, cmp.Or(cfg.Workspace, DefaultWorkspace), cfg.CacheDir); err != nil {
		return nil, err
	}
	p.c, p.d = httpapi.Planes(Name, cfg.BaseURL, http.Header{"Authorization": {"Bearer " + cfg.Token}}, cfg.Timeout, statusTable, statusTable)
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, BrowserProfile: true, Exec: true, Create: true, NativeCheckpoints: true}
}

func sandboxPath(id providers.InstanceID) string {
	return "/v1/sandboxes/" + url.PathEscape(string(id))
}

type sandbox struct {
	ID    string `json:"id"`
	State string `json:"state"`
}

// detailLost is Inspect's detail for a sandbox whose container lost its disk.
const detailLost = "state lost: the sandbox's container restarted without its disk"

// Inspect implements providers.Provider.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	var sb sandbox
	status, err := p.c.GetInstance(ctx, id, sandboxPath(id), &sb, http.StatusNotFound)
	if err != nil {
		return providers.Status{}, err
	}
	st := providers.Status{Instance: id, ObservedAt: p.now()}
	switch {
	case status == http.StatusNotFound:
		st.State, st.Detail = providers.Missing, "GET /v1/sandboxes/{id}: 404 (the bridge has no such sandbox)"
	case sb.State == "running":
		st.State, st.Detail = providers.Running, "state running"
	case sb.State == "lost":
		st.State, st.Detail = providers.Missing, detailLost
	default:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: sb.State,
			Err: errors.New("the bridge reports state " + sb.State + ", neither running nor lost")}
	}
	return st, nil
}

// Create implements providers.Provider: PUT /v1/sandboxes/{name}, the name
// derived from the idempotency key (a fresh one without), then the
// workspace directory is made.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	name := boxfiles.TmpName("sbx")
	if spec.IdempotencyKey != "" {
		name = providers.KeyedName(spec.IdempotencyKey)
	}
	id := providers.InstanceID(name)
	var sb sandbox
	if _, err := p.c.Do(ctx, op, id, http.MethodPut, sandboxPath(id), map[string]any{"labels": spec.Labels}, &sb); err != nil {
		return "", err
	}
	if err := p.MakeWorkspace(ctx, op, id); err != nil {
		return "", err
	}
	return id, nil
}

// Destroy implements providers.Provider: DELETE /v1/sandboxes/{id}; 404
// means already gone. The local mirror goes too.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	_, err := p.c.Do(ctx, "destroy", id, http.MethodDelete, sandboxPath(id), nil, nil, http.StatusNotFound)
	if err == nil {
		p.DropMirror(id)
	}
	return err
}

// Checkpoint implements providers.Provider: a directory backup of the
// workspace (POST /v1/sandboxes/{id}/backups).
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	var out struct {
		ID string `json:"id"`
	}
	if _, err := p.c.Do(ctx, "checkpoint", id, http.MethodPost, sandboxPath(id)+"/backups", map[string]string{"dir": p.Files.Layout.Workspace}, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", &providers.Error{Provider: Name, Op: "checkpoint", Instance: id, Kind: providers.KindUnavailable, Err: errors.New("the bridge answered without a backup id")}
	}
	return providers.CheckpointID(out.ID), nil
}

// Rollback implements providers.Provider: the backup is restored into the
// same sandbox (POST .../backups/{cp}/restore), whose id is returned. A
// sandbox the bridge no longer has (destroyed, or never recorded) is made
// again under the same name first (a name always resolves to a Durable
// Object, with a fresh container); if the restore then fails, that new
// sandbox is destroyed again, so a failed rollback never leaves an empty
// sandbox where the lost one was.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	const op = "rollback"
	st, err := p.Inspect(ctx, id)
	if err != nil {
		return "", err
	}
	made := false
	if st.State == providers.Missing && st.Detail != detailLost {
		if _, err := p.c.Do(ctx, op, id, http.MethodPut, sandboxPath(id), map[string]any{}, nil); err != nil {
			return "", err
		}
		made = true
	}
	if _, err := p.c.Do(ctx, op, id, http.MethodPost, sandboxPath(id)+"/backups/"+url.PathEscape(string(cp))+"/restore", nil, nil); err != nil {
		if made {
			_, _ = p.c.Do(context.WithoutCancel(ctx), op, id, http.MethodDelete, sandboxPath(id), nil, nil, http.StatusNotFound)
		}
		return "", err
	}
	return id, nil
}

// DeleteCheckpoint implements providers.Provider: DELETE /v1/backups/{cp};
// 404 means already gone.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	_, err := p.c.Do(ctx, "delete checkpoint", "", http.MethodDelete, "/v1/backups/"+url.PathEscape(string(cp)), nil, nil, http.StatusNotFound)
	return err
}

// box is the bridge's data plane for boxfiles.
type box struct{ p *Provider }

// Upload implements boxfiles.Box: PUT .../files?path=.
func (b box) Upload(ctx context.Context, id providers.InstanceID, path string, r io.Reader, size int64) error {
	hdr := http.Header{"Content-Type": {"application/octet-stream"}}
	return boxfiles.Upload(ctx, &b.p.d, id, http.MethodPut, sandboxPath(id)+"/files?"+url.Values{"path": {path}}.Encode(), hdr, io.LimitReader(r, size))
}

// Download implements boxfiles.Box: GET .../files?path=.
func (b box) Download(ctx context.Context, id providers.InstanceID, path string, w io.Writer) error {
	return boxfiles.Download(ctx, &b.p.d, id, http.MethodGet, sandboxPath(id)+"/files?"+url.Values{"path": {path}}.Encode(), nil, nil, w, path)
}

// Run implements boxfiles.Box: POST .../exec.
func (b box) Run(ctx context.Context, id providers.InstanceID, dir string, argv []string) (providers.ExecResult, error) {
	var out struct {
		ExitCode int    `json:"exitCode"`
		Stdout   string `json:"stdout"`
		Stderr   string `json:"stderr"`
	}
	if _, err := b.p.d.Do(ctx, "exec", id, http.MethodPost, sandboxPath(id)+"/exec", map[string]any{"argv": argv, "cwd": dir}, &out); err != nil {
		return providers.ExecResult{}, err
	}
	o := providers.NewExecOutput()
	o.Stdout.Write([]byte(out.Stdout))
	o.Stderr.Write([]byte(out.Stderr))
	return o.Result(out.ExitCode), nil
}
