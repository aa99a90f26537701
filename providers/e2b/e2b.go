// Package e2b is the Provider for E2B sandboxes. The control plane is
// E2B's REST API (https://api.e2b.app, header X-API-Key: spec/openapi.yml
// of github.com/e2b-dev/E2B): Inspect, Create, Destroy, Pause and Resume.
// The data plane is envd, the daemon E2B runs inside every sandbox
// (spec/envd/envd.yaml and spec/envd/process/process.proto of the same
// repository), reached at https://49983-<sandbox>.<domain> or, when
// Config.SandboxURL is set, at that URL with the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers (the SDKs' E2B_SANDBOX_URL mode). Files and
// Exec are boxfiles over envd (box.go): uploads with POST /files, downloads
// with GET /files, commands with process.Process/Start (Connect protocol,
// JSON, server stream); trees move as tar archives made and unpacked by
// GNU tar in the sandbox. What survives is what FileSupport says: hard
// links and fifos yes; xattrs, holes and owners no.
//
// It has been tested only against a local contract server built from the
// specifications above (e2btest), never against the live service.
//
// Missing is reported only when GET /sandboxes/{id} answers 404: the edge's
// "The sandbox was not found" (502 in older versions, 404 now) also answers
// for a sandbox that is not routable yet, so data-plane answers are never
// used to decide Missing.
package e2b

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"time"

	"lifeboat/internal/keylock"
	"lifeboat/internal/osutil"
	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
	"lifeboat/providers/httpapi"
)

// Name is this adapter's name.
const Name = "e2b"

// DefaultBaseURL is E2B's control plane.
const DefaultBaseURL = "https://api.e2b.app"

// keyLabel is the metadata key that carries the idempotency key.
const keyLabel = "lifeboat-idempotency-key"

// statusTable is the adapter's one mapping of E2B API statuses (sources in
// docs/providers.md). 404 is read as Missing by Inspect only and as
// "already gone" by Destroy; elsewhere it is a conflict.
var statusTable = httpapi.Statuses(httpapi.StatusTable{
	409: providers.KindConflict, // paused, or already running on resume
	410: providers.KindConflict,
	500: providers.KindUnavailable,
	502: providers.KindUnavailable, // the edge's "sandbox was not found" is not proof
	503: providers.KindUnavailable,
	504: providers.KindUnavailable,
	507: providers.KindUnavailable, // not enough space
})

// Config says how to reach E2B.
type Config struct {
	APIKey   string
	BaseURL  string        // default DefaultBaseURL
	Template string        // default template for Create
	Timeout  time.Duration // per control-plane request, default 30 s
	// SandboxTimeout is the lifetime asked for a created or resumed
	// sandbox, in seconds (E2B's default is 300).
	SandboxTimeout int
	// SandboxURL, when set, is where every envd request goes, naming the
	// sandbox in the E2b-Sandbox-Id header (E2B_SANDBOX_URL in the SDKs);
	// otherwise https://49983-<id>.<domain>.
	SandboxURL string
	// Domain is the sandbox domain when the sandbox does not name one
	// (default "e2b.app").
	Domain string
	// User is the sandbox user commands and files act as (default "user").
	User string
	// Workspace is the workspace directory in the sandbox, absolute, not
	// "/" (default "/home/user/workspace"); Lifeboat keeps its own files
	// beside it, in .lifeboat-<base> (see boxfiles).
	Workspace string
	// TransferTimeout bounds one file transfer or command (default 30 min).
	TransferTimeout time.Duration
	// ReadyTimeout is how long Create waits for a new sandbox's envd to
	// answer (default 60 s).
	ReadyTimeout time.Duration
	// CacheDir holds the local mirrors ReadFiles makes, one per instance
	// (default <system temp>/lifeboat-e2b).
	CacheDir string
}

// Provider is an E2B account.
type Provider struct {
	boxfiles.Files
	c     httpapi.Client // control plane
	long  httpapi.Client // control plane, for snapshots (TransferTimeout)
	data  httpapi.Client // envd: no API key, a longer timeout
	cfg   Config
	locks keylock.Map[string] // Create takes turns per idempotency key in this process (not across processes: docs/providers.md)
	now   func() time.Time
	// readyBackoff is the first wait between tries of a new sandbox's
	// envd (tests shorten it).
	readyBackoff time.Duration
}

var _ providers.Provider = (*Provider)(nil)

// New returns a Provider for cfg; a workspace that is not absolute, or is
// "/", is an error.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.TransferTimeout <= 0 {
		cfg.TransferTimeout = 30 * time.Minute
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Minute
	}
	if cfg.Domain == "" {
		cfg.Domain = "e2b.app"
	}
	if cfg.User == "" {
		cfg.User = "user"
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "/home/user/workspace"
	}
	if err := boxfiles.CheckWorkspace(cfg.Workspace); err != nil {
		return nil, err
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(os.TempDir(), "lifeboat-e2b")
	}
	p := &Provider{
		c: httpapi.Client{Provider: Name, BaseURL: cfg.BaseURL, Header: http.Header{"X-Api-Key": {cfg.APIKey}},
			HTTP: &http.Client{Timeout: cfg.Timeout}, Table: statusTable},
		long: httpapi.Client{Provider: Name, BaseURL: cfg.BaseURL, Header: http.Header{"X-Api-Key": {cfg.APIKey}},
			HTTP: &http.Client{Timeout: cfg.TransferTimeout}, Table: statusTable},
		data: httpapi.Client{Provider: Name, HTTP: &http.Client{Timeout: cfg.TransferTimeout}, Table: statusTable},
		cfg:  cfg, now: time.Now, readyBackoff: 250 * time.Millisecond,
	}
	p.Files = boxfiles.Files{Provider: Name, Box: box{p}, Layout: boxfiles.Layout{Workspace: path.Clean(cfg.Workspace)}, CacheDir: cfg.CacheDir}
	return p, nil
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider: files and Exec through
// envd, Create and Destroy, Pause and Resume, native checkpoints as E2B
// snapshots.
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{Files: true, Exec: true, Create: true, Pause: true, NativeCheckpoints: true}
}

type sandbox struct {
	SandboxID       string            `json:"sandboxID"`
	State           string            `json:"state"`
	Metadata        map[string]string `json:"metadata"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain,omitempty"`
}

func sandboxPath(id providers.InstanceID) string { return "/sandboxes/" + url.PathEscape(string(id)) }

// Inspect implements providers.Provider: GET /sandboxes/{id}; "running" is
// Running, "paused" is Stopped, 404 is Missing, any other state is a
// conflict naming it.
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
		st.State, st.Detail = providers.Missing, "GET /sandboxes/{id}: 404"
	case sb.State == "running":
		st.State, st.Detail = providers.Running, "state running"
	case sb.State == "paused":
		st.State, st.Detail = providers.Stopped, "state paused"
	default:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: sb.State, Err: errState(sb.State)}
	}
	return st, nil
}

// Create implements providers.Provider: E2B has no idempotency key, so the
// key is stored in the sandbox's metadata and Create first lists sandboxes
// carrying it (GET /v2/sandboxes?metadata=...); it creates (POST
// /sandboxes) only when none is found; either way it makes the workspace
// directory (mkdir -p through envd; a sandbox envd cannot route yet is
// unavailable, and the retried Create finds the same sandbox). Creates with
// one key are serialised in this process; two processes racing with one
// key can still make two.
func (p *Provider) Create(ctx context.Context, spec providers.CreateSpec) (providers.InstanceID, error) {
	const op = "create"
	if spec.IdempotencyKey != "" {
		defer p.locks.Lock(spec.IdempotencyKey)()
		var found []sandbox
		q := url.Values{"metadata": {keyLabel + "=" + spec.IdempotencyKey}}
		if _, err := p.c.Do(ctx, op, "", http.MethodGet, "/v2/sandboxes?"+q.Encode(), nil, &found); err != nil {
			return "", err
		}
		for _, sb := range found {
			if sb.Metadata[keyLabel] == spec.IdempotencyKey && sb.SandboxID != "" {
				id := providers.InstanceID(sb.SandboxID)
				return id, p.ready(ctx, op, id)
			}
		}
	}
	meta := map[string]string{}
	for k, v := range spec.Labels {
		meta[k] = v
	}
	if spec.IdempotencyKey != "" {
		meta[keyLabel] = spec.IdempotencyKey
	}
	tmpl := spec.Template
	if tmpl == "" {
		tmpl = p.cfg.Template
	}
	body := map[string]any{"templateID": tmpl, "metadata": meta}
	if p.cfg.SandboxTimeout > 0 {
		body["timeout"] = p.cfg.SandboxTimeout
	}
	var sb sandbox
	if _, err := p.c.Do(ctx, op, "", http.MethodPost, "/sandboxes", body, &sb); err != nil {
		return "", err
	}
	if sb.SandboxID == "" {
		return "", &providers.Error{Provider: Name, Op: op, Kind: providers.KindUnavailable, Err: errNoID}
	}
	id := providers.InstanceID(sb.SandboxID)
	return id, p.ready(ctx, op, id)
}

// ready makes the workspace of a sandbox just created, retrying while
// envd is unavailable for up to Config.ReadyTimeout: E2B answers POST
// /sandboxes before its edge can route to the new sandbox, and meanwhile
// answers envd requests with the same 502 "sandbox was not found" as for
// a dead one. Any other failure (auth, a refused mkdir) ends it at once.
func (p *Provider) ready(ctx context.Context, op string, id providers.InstanceID) error {
	deadline := p.now().Add(p.cfg.ReadyTimeout)
	wait := p.readyBackoff
	for {
		err := p.MakeWorkspace(ctx, op, id)
		if err == nil || providers.KindOf(err) != providers.KindUnavailable || ctx.Err() != nil || !p.now().Before(deadline) {
			return err
		}
		if osutil.Sleep(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// Destroy implements providers.Provider: DELETE /sandboxes/{id} (E2B's
// kill); 404 means already gone. The local mirror goes too.
func (p *Provider) Destroy(ctx context.Context, id providers.InstanceID) error {
	_, err := p.c.Do(ctx, "destroy", id, http.MethodDelete, sandboxPath(id), nil, nil, http.StatusNotFound)
	if err == nil {
		p.DropMirror(id)
	}
	return err
}
