// Package httpapi is the small JSON-over-HTTP client the HTTP sandbox
// platform adapters (e2b, vercel, daytona, cloudflare) share: one request helper that maps every
// non-2xx answer through the calling adapter's status table into a
// *providers.Error, parses Retry-After, and turns transport failures and
// timeouts into KindUnavailable. It never puts credentials in errors.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"lifeboat/providers"
)

// StatusTable maps HTTP statuses to kinds for one adapter. Statuses not
// listed fall back by class: 5xx unavailable, other 4xx invalid.
type StatusTable map[int]providers.Kind

// Kind looks status up in t.
func (t StatusTable) Kind(status int) providers.Kind {
	if k, ok := t[status]; ok {
		return k
	}
	if status >= 500 {
		return providers.KindUnavailable
	}
	return providers.KindInvalid
}

// common is what the same status means on every platform, after the
// kinds' contract (providers.Kind).
var common = StatusTable{
	400: providers.KindInvalid,
	401: providers.KindUnauthorized,
	403: providers.KindUnauthorized,
	404: providers.KindConflict, // Missing or "already gone" only where a caller passes it
	409: providers.KindConflict,
	429: providers.KindRateLimited,
}

// Statuses is an adapter's table: 400 invalid, 401 and 403 unauthorized,
// 404 and 409 a conflict, 429 rate limited, with the statuses of more
// added or replaced.
func Statuses(more StatusTable) StatusTable {
	t := maps.Clone(common)
	maps.Copy(t, more)
	return t
}

// Client calls one platform API.
type Client struct {
	Provider string
	BaseURL  string
	Header   http.Header // auth headers; never echoed into errors
	HTTP     *http.Client
	Table    StatusTable
}

// Planes returns an adapter's control-plane client, each request bounded
// by timeout (30 s when not positive), and its data-plane client (file
// transfers and commands, bounded only by their context); both send hdr to
// baseURL and map statuses through their own table.
func Planes(provider, baseURL string, hdr http.Header, timeout time.Duration, control, data StatusTable) (c, d Client) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return Client{Provider: provider, BaseURL: baseURL, Header: hdr, HTTP: &http.Client{Timeout: timeout}, Table: control},
		Client{Provider: provider, BaseURL: baseURL, Header: hdr, HTTP: &http.Client{}, Table: data}
}

// maxBody bounds how much of an error body is kept for the message.
const maxBody = 512

// Do sends method path with body (JSON-encoded when not nil) and decodes a
// 2xx answer into out (when not nil). Statuses in pass are returned to the
// caller with a nil error (e.g. 404 for an Inspect that reads it as
// Missing), a 404 or 410 only when it carries the platform's JSON error
// (see notPlatform); every other non-2xx status is an *Error via c.Table.
func (c *Client) Do(ctx context.Context, op string, id providers.InstanceID, method, path string, body, out any, pass ...int) (int, error) {
	var rd io.Reader
	hdr := http.Header{"Accept": {"application/json"}}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, c.fail(op, id, providers.KindInvalid, "", err)
		}
		rd = bytes.NewReader(b)
		hdr.Set("Content-Type", "application/json")
	}
	req, err := c.newRequest(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, hdr, rd)
	if err != nil {
		return 0, c.fail(op, id, providers.KindInvalid, "", err)
	}
	what := method + " " + path
	resp, status, err := c.send(ctx, op, id, what, req, pass)
	if err != nil {
		return status, err
	}
	defer resp.Body.Close()
	if slices.Contains(pass, status) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return status, nil
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
			return status, c.fail(op, id, providers.KindUnavailable, "decode", fmt.Errorf("%s: undecodable answer: %w", what, err))
		}
	}
	return status, nil
}

// newRequest is a request to url with the Client's headers, then hdr, and
// a non-browser User-Agent (E2B's edge answers browsers with HTML).
func (c *Client) newRequest(ctx context.Context, method, url string, hdr http.Header, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", "lifeboat")
	return req, nil
}

// send sends req, named what in errors, and returns the response, whose
// body the caller closes, for a 2xx status or one in pass (a 404 or 410
// only with the platform's JSON body). Every other status is an error
// through c.Table, and a transport failure or a timeout is
// KindUnavailable. status is the answer's status, 0 when none came.
func (c *Client) send(ctx context.Context, op string, id providers.InstanceID, what string, req *http.Request, pass []int) (resp *http.Response, status int, err error) {
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err = hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, c.fail(op, id, providers.KindUnavailable, "context", fmt.Errorf("%s: %w", what, ctx.Err()))
		}
		return nil, 0, c.fail(op, id, providers.KindUnavailable, "transport", fmt.Errorf("%s: %w", what, err))
	}
	if slices.Contains(pass, resp.StatusCode) {
		if err := c.notPlatform(op, id, what, resp); err != nil {
			resp.Body.Close()
			return nil, resp.StatusCode, err
		}
		return resp, resp.StatusCode, nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, resp.StatusCode, nil
	}
	defer resp.Body.Close()
	return nil, resp.StatusCode, c.StatusError(op, id, what, resp, time.Now())
}

func (c *Client) fail(op string, id providers.InstanceID, k providers.Kind, code string, err error) error {
	return &providers.Error{Provider: c.Provider, Op: op, Instance: id, Kind: k, Code: code, Err: err}
}

// MaxRetryAfter caps the wait a platform can ask for: a longer (or
// absurd) Retry-After is read as this, so a misbehaving platform cannot
// park checks and recoveries for days.
const MaxRetryAfter = time.Hour

// ParseRetryAfter reads a Retry-After header: delay-seconds or an HTTP
// date, at most MaxRetryAfter; 0 when absent or unreadable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		// Digits only: a number too large to parse is over the cap too.
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return CapRetryAfter(t.Sub(now))
	}
	return 0
}

// CapRetryAfter bounds a wait computed from a platform's answer to
// [0, MaxRetryAfter].
func CapRetryAfter(d time.Duration) time.Duration {
	return max(0, min(d, MaxRetryAfter))
}

// Unsupported is the error for an operation an adapter does not offer.
func Unsupported(provider, op string, id providers.InstanceID, why string) error {
	return &providers.Error{Provider: provider, Op: op, Instance: id, Kind: providers.KindUnsupported, Err: errors.New(why)}
}

// NoCheckpoints implements the three checkpoint methods as unsupported, for
// embedding in adapters that have none.
type NoCheckpoints struct{ Provider string }

// Checkpoint implements providers.Provider: unsupported.
func (n NoCheckpoints) Checkpoint(_ context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	return "", Unsupported(n.Provider, "checkpoint", id, "native checkpoints are not implemented by this adapter")
}

// Rollback implements providers.Provider: unsupported.
func (n NoCheckpoints) Rollback(_ context.Context, id providers.InstanceID, _ providers.CheckpointID) (providers.InstanceID, error) {
	return "", Unsupported(n.Provider, "rollback", id, "native checkpoints are not implemented by this adapter")
}

// DeleteCheckpoint implements providers.Provider: unsupported.
func (n NoCheckpoints) DeleteCheckpoint(context.Context, providers.CheckpointID) error {
	return Unsupported(n.Provider, "delete checkpoint", "", "native checkpoints are not implemented by this adapter")
}

// NoFiles implements ReadFiles, WriteFiles and Switch as unsupported.
type NoFiles struct{ Provider string }

// ReadFiles implements providers.Provider: unsupported.
func (n NoFiles) ReadFiles(_ context.Context, id providers.InstanceID) (providers.Files, error) {
	return nil, Unsupported(n.Provider, "read files", id, "file transfer is not implemented by this adapter")
}

// WriteFiles implements providers.Provider: unsupported.
func (n NoFiles) WriteFiles(_ context.Context, id providers.InstanceID, _ string) (string, error) {
	return "", Unsupported(n.Provider, "write files", id, "file transfer is not implemented by this adapter")
}

// Switch implements providers.Provider: unsupported.
func (n NoFiles) Switch(_ context.Context, id providers.InstanceID, _ string) error {
	return Unsupported(n.Provider, "switch", id, "file transfer is not implemented by this adapter")
}
