package managedagents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
)

// Name is this adapter's name.
const Name = "managed-agents"

// DefaultBaseURL is DigitalOcean's API.
const DefaultBaseURL = "https://api.digitalocean.com"

// statusTable is the adapter's one mapping of the API's statuses. 404 is
// Missing only from Inspect's GET of the session, "already gone" for
// DeleteCheckpoint, and a conflict elsewhere.
var statusTable = httpapi.Statuses(httpapi.StatusTable{
	409: providers.KindConflict, // a turn in flight; a state that does not allow it
	422: providers.KindInvalid,
	500: providers.KindUnavailable,
	501: providers.KindUnsupported, // pause/resume on a substrate without it
	502: providers.KindUnavailable,
	503: providers.KindUnavailable,
	504: providers.KindUnavailable,
})

// Config says how to reach the API.
type Config struct {
	Token   string        // API token, sent as "Authorization: Bearer"
	BaseURL string        // default DefaultBaseURL
	Timeout time.Duration // per request, default 30 s
	// CheckpointTimeout bounds a checkpoint or a rollback, which the API
	// answers only once done (default 10 min).
	CheckpointTimeout time.Duration
	Label             string // the label given to checkpoints (default "lifeboat")
}

// Provider is one account on the API.
type Provider struct {
	httpapi.NoFiles
	c    httpapi.Client
	long httpapi.Client
	cfg  Config
	now  func() time.Time
}

var (
	_ providers.Provider = (*Provider)(nil)
	_ providers.Pauser   = (*Provider)(nil)
)

// New returns a Provider for cfg.
func New(cfg Config) *Provider {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.CheckpointTimeout <= 0 {
		cfg.CheckpointTimeout = 10 * time.Minute
	}
	if cfg.Label == "" {
		cfg.Label = "lifeboat"
	}
	h := http.Header{"Authorization": {"Bearer " + cfg.Token}}
	return &Provider{
		NoFiles: httpapi.NoFiles{Provider: Name},
		c:       httpapi.Client{Provider: Name, BaseURL: cfg.BaseURL, Header: h, HTTP: &http.Client{Timeout: cfg.Timeout}, Table: statusTable},
		long:    httpapi.Client{Provider: Name, BaseURL: cfg.BaseURL, Header: h, HTTP: &http.Client{Timeout: cfg.CheckpointTimeout}, Table: statusTable},
		cfg:     cfg, now: time.Now,
	}
}

// Name implements providers.Provider.
func (p *Provider) Name() string { return Name }

// Capabilities implements providers.Provider: native checkpoints and
// pause; no files, exec or create (see the package doc).
func (p *Provider) Capabilities() providers.Capabilities {
	return providers.Capabilities{NativeCheckpoints: true, Pause: true}
}

type session struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	SandboxID string `json:"sandbox_id"`
}

type checkpoint struct {
	CheckpointID string `json:"checkpoint_id"`
	SessionID    string `json:"session_id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"error_message"`
}

// splitInstance reads "<session>/<sandbox>" or "<session>".
func splitInstance(op string, id providers.InstanceID) (sess, sandbox string, err error) {
	sess, sandbox, _ = strings.Cut(string(id), "/")
	if sess == "" || strings.Contains(sandbox, "/") {
		return "", "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid,
			Err: fmt.Errorf("instance id %q is not <session_id>/<sandbox_id> or <session_id>", id)}
	}
	return sess, sandbox, nil
}

func instanceOf(s session) providers.InstanceID {
	if s.SandboxID == "" {
		return providers.InstanceID(s.SessionID)
	}
	return providers.InstanceID(s.SessionID + "/" + s.SandboxID)
}

func sessionPath(sess string) string { return "/v2/agents/sessions/" + url.PathEscape(sess) }

// do sends a JSON request and decodes a 2xx answer into out; statuses in
// pass come back with a nil error. A rate limit without Retry-After takes
// its wait from DigitalOcean's ratelimit-reset header (Unix seconds).
func (p *Provider) do(ctx context.Context, c *httpapi.Client, op string, id providers.InstanceID, method, path string, body, out any, pass ...int) (int, error) {
	var rd io.Reader
	h := http.Header{"Accept": {"application/json"}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid, Err: err}
		}
		rd = bytes.NewReader(b)
		h.Set("Content-Type", "application/json")
	}
	what := method + " " + path
	resp, err := c.Send(ctx, httpapi.Request{Op: op, Instance: id, Method: method, URL: strings.TrimSuffix(c.BaseURL, "/") + path,
		Header: h, Body: rd, Pass: append([]int{http.StatusTooManyRequests}, pass...), What: what})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		err := c.StatusError(op, id, what, resp, p.now())
		var pe *providers.Error
		if errors.As(err, &pe) && pe.RetryAfter == 0 {
			pe.RetryAfter = resetWait(resp.Header.Get("Ratelimit-Reset"), p.now())
		}
		return resp.StatusCode, err
	}
	for _, s := range pass {
		if resp.StatusCode == s {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			return s, nil
		}
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
			return resp.StatusCode, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable, Code: "decode",
				Err: fmt.Errorf("%s: undecodable answer: %w", what, err)}
		}
	}
	return resp.StatusCode, nil
}

// resetWait reads ratelimit-reset (Unix seconds) as a wait from now, at
// most httpapi.MaxRetryAfter.
func resetWait(v string, now time.Time) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= now.Unix() {
		return 0
	}
	if n-now.Unix() > int64(httpapi.MaxRetryAfter/time.Second) {
		return httpapi.MaxRetryAfter
	}
	return httpapi.CapRetryAfter(time.Unix(n, 0).Sub(now))
}
