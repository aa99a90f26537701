package e2b

import (
	"context"
	"net/http"

	"lifeboat/providers"
)

var _ providers.Pauser = (*Provider)(nil)

// Pause implements providers.Pauser: POST /sandboxes/{id}/pause, which
// saves the sandbox's filesystem and memory; pausing a paused sandbox
// (409) is not an error. Paused, envd does not answer: files and Exec
// wait for Resume.
func (p *Provider) Pause(ctx context.Context, id providers.InstanceID) error {
	if id == "" {
		return &providers.Error{Provider: Name, Op: "pause", Kind: providers.KindInvalid, Err: errEmptyID}
	}
	_, err := p.c.Do(ctx, "pause", id, http.MethodPost, sandboxPath(id)+"/pause", nil, nil, http.StatusConflict)
	return err
}

// Resume implements providers.Pauser: POST /sandboxes/{id}/resume with
// the configured sandbox timeout (E2B requires one); resuming a running
// sandbox (409) is not an error.
func (p *Provider) Resume(ctx context.Context, id providers.InstanceID) error {
	if id == "" {
		return &providers.Error{Provider: Name, Op: "resume", Kind: providers.KindInvalid, Err: errEmptyID}
	}
	timeout := p.cfg.SandboxTimeout
	if timeout <= 0 {
		timeout = 300
	}
	_, err := p.c.Do(ctx, "resume", id, http.MethodPost, sandboxPath(id)+"/resume", map[string]any{"timeout": timeout}, nil, http.StatusConflict)
	return err
}
