package vercel

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
	"lifeboat/providers/httpapi"
)

// Name is this adapter's name.
const Name = "vercel"

// DefaultBaseURL is where the official SDK sends its requests.
const DefaultBaseURL = "https://vercel.com/api"

// DefaultWorkspace is the workspace directory in a sandbox: under the
// sandbox's working directory, which its user can write.
const DefaultWorkspace = "/vercel/sandbox/workspace"

// statusTable maps Vercel's answers (sources in docs/providers.md). 404
// is Missing for Inspect only; 410 (sandbox_stopped) comes from the data
// plane of a stopped sandbox and is a conflict there.
var statusTable = httpapi.Statuses(httpapi.StatusTable{
	410: providers.KindConflict,
	422: providers.KindInvalid,
})

// Config says how to reach Vercel.
type Config struct {
	Token     string // access token (a secret)
	TeamID    string
	ProjectID string
	BaseURL   string        // default DefaultBaseURL
	Runtime   string        // sandbox runtime for Create ("node22"); default the platform's
	Workspace string        // default DefaultWorkspace
	CacheDir  string        // local mirrors and the idempotency records (required)
	Timeout   time.Duration // per control-plane request, default 30 s
	// SandboxTimeout is the lifetime asked for a created sandbox; 0 is
	// the platform's default.
	SandboxTimeout time.Duration
}

// Provider is a Vercel project.
type Provider struct {
	httpapi.NoCheckpoints
	boxfiles.Files
	c, d httpapi.Client // control plane (bounded requests), data plane (bounded by ctx)
	cfg  Config
	keys keylock.Map[string] // Create takes turns per idempotency key in this process (not across processes: docs/providers.md)
	now  func() time.Time
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.ProjectID == "" {
		return nil, errors.New("vercel: a project id is required")
	}
	p := &Provider{NoCheckpoints: httpapi.NoCheckpoints{Provider: Name}, cfg: cfg, now: time.Now}
	if err := p.Files.Init(Name, box{p}, cmp.Or(cfg.Workspace, DefaultWorkspace), cfg.CacheDir); err != nil {
		return nil, err
	}
	p.c, p.d = httpapi.Planes(Name, cmp.Or(cfg.BaseURL, DefaultBaseURL), http.Header{"Authorization": {"Bearer " + cfg.Token}}, cfg.Timeout, statusTable, statusTable)
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, BrowserProfile: true, Exec: true, Create: true}
}

// q is the query every request carries.
func (p *Provider) q(path string) string {
	if p.cfg.TeamID == "" {
		return path
	}
	return path + "?" + url.Values{"teamId": {p.cfg.TeamID}}.Encode()
}

func sandboxPath(id providers.InstanceID) string {
	return "/v1/sandboxes/" + url.PathEscape(string(id))
}

type sandboxResponse struct {
	Sandbox struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"sandbox"`
}

// Inspect implements providers.Provider.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	var sb sandboxResponse
	status, err := p.c.GetInstance(ctx, id, p.q(sandboxPath(id)), &sb, http.StatusNotFound)
	if err != nil {
		return providers.Status{}, err
	}
	st := providers.Status{Instance: id, ObservedAt: p.now()}
	switch s := sb.Sandbox.Status; {
	case status == http.StatusNotFound:
		st.State, st.Detail = providers.Missing, "GET /v1/sandboxes/{id}: 404"
	case s == "running":
		st.State, st.Detail = providers.Running, "status running"
	case s == "snapshotting":
		st.State, st.Detail = providers.Stopped, "status snapshotting: the sandbox stops once its snapshot is taken"
	case s == "stopped" || s == "stopping" || s == "failed" || s == "aborted":
		st.State, st.Detail = providers.Missing, "status "+s+": a Vercel sandbox that stopped cannot be started again and its filesystem is gone"
	default:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: s,
			Err: errors.New("sandbox is in status " + s + ", neither running nor stopped; try again later")}
	}
	return st, nil
}

// Create implements providers.Provider: POST /v1/sandboxes, then the
// workspace directory is made; with an idempotency key, a sandbox recorded
// for the key is returned instead (see the package doc).
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	var rec string
	if spec.IdempotencyKey != "" {
		defer p.keys.Lock(spec.IdempotencyKey)()
		rec = filepath.Join(p.cfg.CacheDir, "keys", providers.KeyedName(spec.IdempotencyKey))
		if b, err := os.ReadFile(rec); err == nil && len(b) > 0 {
			// The first Create may have failed before its mkdir.
			id := providers.InstanceID(strings.TrimSpace(string(b)))
			return id, p.MakeWorkspace(ctx, op, id)
		}
	}
	body := map[string]any{"projectId": p.cfg.ProjectID}
	if rt := cmp.Or(spec.Template, p.cfg.Runtime); rt != "" {
		body["runtime"] = rt
	}
	if p.cfg.SandboxTimeout > 0 {
		body["timeout"] = p.cfg.SandboxTimeout.Milliseconds()
	}
	var sb sandboxResponse
	if _, err := p.c.Do(ctx, op, "", http.MethodPost, p.q("/v1/sandboxes"), body, &sb); err != nil {
		return "", err
	}
	id := providers.InstanceID(sb.Sandbox.ID)
	if id == "" {
		return "", &providers.Error{Provider: Name, Op: op, Kind: providers.KindUnavailable, Err: errors.New("POST /v1/sandboxes answered without a sandbox id")}
	}
	if rec != "" {
		if err := writeRecord(rec, string(id)); err != nil {
			return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable,
				Err: errors.New("sandbox created but its idempotency record could not be written: " + err.Error())}
		}
	}
	if err := p.MakeWorkspace(ctx, op, id); err != nil {
		return "", err
	}
	return id, nil
}

// Destroy implements providers.Provider: POST /v1/sandboxes/{id}/stop; a
// sandbox already gone (404) or stopped (410) is not an error.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	_, err := p.c.Do(ctx, "destroy", id, http.MethodPost, p.q(sandboxPath(id)+"/stop"), nil, nil, http.StatusNotFound, http.StatusGone)
	if err == nil {
		p.DropMirror(id)
	}
	return err
}

// writeRecord writes an idempotency record atomically.
func writeRecord(path, id string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
