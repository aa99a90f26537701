package e2b

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
)

// envdPort is the port envd listens on inside every sandbox.
const envdPort = "49983"

// envd is one sandbox's envd: where to send requests and how to
// authenticate them.
type envd struct {
	p      *Provider
	id     providers.InstanceID
	base   string
	header http.Header
}

// envd looks the sandbox up on the control plane (GET /sandboxes/{id}) for
// its envd access token and domain. A sandbox the control plane does not
// know is KindConflict (Inspect confirms whether it is missing); a paused
// one is KindConflict too, since envd does not answer while paused.
func (p *Provider) envd(ctx context.Context, op string, id providers.InstanceID) (*envd, error) {
	if id == "" {
		return nil, &providers.Error{Provider: Name, Op: op, Kind: providers.KindInvalid, Err: errEmptyID}
	}
	var sb sandbox
	status, err := p.c.Do(ctx, op, id, http.MethodGet, sandboxPath(id), nil, &sb, http.StatusNotFound)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusNotFound:
		return nil, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: "404", Err: errNotFound}
	case sb.State == "paused":
		return nil, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: sb.State, Err: errPaused}
	}
	h := http.Header{
		// envd names the user by basic auth with an empty password.
		"Authorization":    {"Basic " + base64.StdEncoding.EncodeToString([]byte(p.cfg.User+":"))},
		"E2b-Sandbox-Id":   {string(id)},
		"E2b-Sandbox-Port": {envdPort},
	}
	if sb.EnvdAccessToken != "" {
		h.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	base := strings.TrimSuffix(p.cfg.SandboxURL, "/")
	if base == "" {
		domain := p.cfg.Domain
		if sb.Domain != nil && *sb.Domain != "" {
			domain = *sb.Domain
		}
		base = "https://" + envdPort + "-" + string(id) + "." + domain
	}
	return &envd{p: p, id: id, base: base, header: h}, nil
}

func (e *envd) filesURL(p string) string {
	q := url.Values{"path": {p}, "username": {e.p.cfg.User}}
	return e.base + "/files?" + q.Encode()
}

// upload writes r to the file at the absolute path p through POST /files
// (multipart/form-data, field "file"); envd makes the parent directories.
func (e *envd) upload(ctx context.Context, op, p string, r io.Reader) error {
	pr, ctype := httpapi.MultipartFile("file", path.Base(p), r)
	h := e.header.Clone()
	h.Set("Content-Type", ctype)
	resp, err := e.p.data.Send(ctx, httpapi.Request{Op: op, Instance: e.id, Method: http.MethodPost, URL: e.filesURL(p), Header: h, Body: pr,
		What: "POST /files " + p})
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.Body.Close()
}

// download opens the file at the absolute path p through GET /files.
func (e *envd) download(ctx context.Context, op, p string) (io.ReadCloser, error) {
	resp, err := e.p.data.Send(ctx, httpapi.Request{Op: op, Instance: e.id, Method: http.MethodGet, URL: e.filesURL(p), Header: e.header,
		What: "GET /files " + p})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
