package daytona

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
	"lifeboat/providers/httpapi"
)

// Name is this adapter's name.
const Name = "daytona"

// DefaultBaseURL is Daytona's API.
const DefaultBaseURL = "https://app.daytona.io/api"

// DefaultWorkspace is the workspace directory in a sandbox, in the home of
// Daytona's default user.
const DefaultWorkspace = "/home/daytona/workspace"

const (
	keyLabel     = "lifeboat-idempotency-key"
	stoppedLabel = "lifeboat-stopped-at"
)

// controlTable maps the sandbox routes' answers; 404 and 410 are Missing
// for Inspect only.
var controlTable = httpapi.Statuses(httpapi.StatusTable{
	408: providers.KindUnavailable,
	410: providers.KindConflict,
	422: providers.KindInvalid,
})

// toolboxTable maps the toolbox's answers: its 400 is "Is the Sandbox
// started?", a state conflict.
var toolboxTable = httpapi.Statuses(httpapi.StatusTable{
	400: providers.KindConflict,
	408: providers.KindUnavailable,
	410: providers.KindConflict,
})

// Config says how to reach Daytona.
type Config struct {
	APIKey         string // a secret
	OrganizationID string // optional: X-Daytona-Organization-ID
	BaseURL        string // default DefaultBaseURL
	Snapshot       string // the snapshot (image) Create starts from; default the platform's
	Workspace      string // default DefaultWorkspace
	CacheDir       string // local mirrors (required)
	Timeout        time.Duration
}

// Provider is a Daytona organization.
type Provider struct {
	httpapi.NoCheckpoints
	boxfiles.Files
	c, d httpapi.Client
	cfg  Config
	keys keylock.Map[string] // Create takes turns per idempotency key in this process (not across processes: docs/providers.md)
	now  func() time.Time
}

var (
	_ providers.Provider      = (*Provider)(nil)
	_ providers.Stopper       = (*Provider)(nil)
	_ providers.FileSupporter = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	p := &Provider{NoCheckpoints: httpapi.NoCheckpoints{Provider: Name}, cfg: cfg, now: time.Now}
	if err := p.Files.Init(Name, box{p}, cmp.Or(cfg.Workspace, DefaultWorkspace), cfg.CacheDir); err != nil {
		return nil, err
	}
	hdr := http.Header{"Authorization": {"Bearer " + cfg.APIKey}}
	if cfg.OrganizationID != "" {
		hdr.Set("X-Daytona-Organization-ID", cfg.OrganizationID)
	}
	p.c, p.d = httpapi.Planes(Name, cmp.Or(cfg.BaseURL, DefaultBaseURL), hdr, cfg.Timeout, controlTable, toolboxTable)
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, BrowserProfile: true, Exec: true, Create: true}
}

func sandboxPath(id providers.InstanceID) string { return "/sandbox/" + url.PathEscape(string(id)) }

type sandbox struct {
	ID     string            `json:"id"`
	State  string            `json:"state"`
	Labels map[string]string `json:"labels"`
}

// Inspect implements providers.Provider.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	var sb sandbox
	status, err := p.c.GetInstance(ctx, id, sandboxPath(id), &sb, http.StatusNotFound, http.StatusGone)
	if err != nil {
		return providers.Status{}, err
	}
	st := providers.Status{Instance: id, ObservedAt: p.now()}
	switch s := sb.State; {
	case status == http.StatusNotFound || status == http.StatusGone:
		st.State, st.Detail = providers.Missing, "GET /sandbox/{id}: "+http.StatusText(status)
	case s == "destroyed" || s == "destroying":
		st.State, st.Detail = providers.Missing, "state "+s
	case s == "started":
		st.State, st.Detail = providers.Running, "state started"
	case s == "stopped" || s == "archived":
		st.State, st.Detail = providers.Stopped, "state "+s
		if at := sb.Labels[stoppedLabel]; at != "" {
			st.Detail += ": stopped by Lifeboat at " + at
		}
	default:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: s,
			Err: errors.New("sandbox is in state " + s + "; try again once it has settled")}
	}
	return st, nil
}

// Create implements providers.Provider.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.IdempotencyKey != "" {
		defer p.keys.Lock(spec.IdempotencyKey)()
		labels[keyLabel] = providers.KeyedName(spec.IdempotencyKey)
		q, _ := json.Marshal(map[string]string{keyLabel: labels[keyLabel]})
		var found []sandbox
		if _, err := p.c.Do(ctx, op, "", http.MethodGet, "/sandbox?"+url.Values{"labels": {string(q)}}.Encode(), nil, &found); err != nil {
			return "", err
		}
		for _, sb := range found {
			if sb.Labels[keyLabel] == labels[keyLabel] && sb.ID != "" && sb.State != "destroyed" && sb.State != "destroying" {
				// The first Create may have failed before its mkdir.
				id := providers.InstanceID(sb.ID)
				return id, p.MakeWorkspace(ctx, op, id)
			}
		}
	}
	body := map[string]any{"labels": labels}
	if s := cmp.Or(spec.Template, p.cfg.Snapshot); s != "" {
		body["snapshot"] = s
	}
	var sb sandbox
	if _, err := p.c.Do(ctx, op, "", http.MethodPost, "/sandbox", body, &sb); err != nil {
		return "", err
	}
	if sb.ID == "" {
		return "", &providers.Error{Provider: Name, Op: op, Kind: providers.KindUnavailable, Err: errors.New("POST /sandbox answered without an id")}
	}
	id := providers.InstanceID(sb.ID)
	if err := p.MakeWorkspace(ctx, op, id); err != nil {
		return "", err
	}
	return id, nil
}

// Destroy implements providers.Provider: DELETE /sandbox/{id}; 404 means
// already gone.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	_, err := p.c.Do(ctx, "destroy", id, http.MethodDelete, sandboxPath(id), nil, nil, http.StatusNotFound, http.StatusGone)
	if err == nil {
		p.DropMirror(id)
	}
	return err
}

// Stop implements providers.Stopper: the sandbox is labelled with the time
// (PUT /sandbox/{id}/labels) and stopped (POST /sandbox/{id}/stop); its
// files stay on its runner. A stopped or archived sandbox is left alone; a
// missing one is a conflict.
func (p *Provider) Stop(ctx context.Context, id providers.InstanceID) error {
	const op = "stop"
	var sb sandbox
	if _, err := p.c.Do(ctx, op, id, http.MethodGet, sandboxPath(id), nil, &sb); err != nil {
		return err
	}
	if sb.State == "stopped" || sb.State == "archived" {
		return nil
	}
	labels := map[string]string{}
	for k, v := range sb.Labels {
		labels[k] = v
	}
	labels[stoppedLabel] = p.now().UTC().Format(time.RFC3339)
	if _, err := p.c.Do(ctx, op, id, http.MethodPut, sandboxPath(id)+"/labels", map[string]any{"labels": labels}, nil); err != nil {
		return err
	}
	_, err := p.c.Do(ctx, op, id, http.MethodPost, sandboxPath(id)+"/stop", nil, nil)
	return err
}
