package managedagents

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
)

// Inspect implements providers.Provider: GET /v2/agents/sessions/{id}.
// READY and DETACHED are running, PAUSED stopped; a 404 or a session the
// platform reports DESTROYED is missing. PROVISIONING, DESTROYING, FAILED
// and anything else are a conflict naming the status, never missing. A
// session now running another sandbox than the one in id (rolled back
// outside Lifeboat) is a conflict naming both.
func (p *Provider) Inspect(ctx context.Context, id providers.InstanceID) (providers.Status, error) {
	const op = "inspect"
	sess, sandbox, err := splitInstance(op, id)
	if err != nil {
		return providers.Status{}, err
	}
	var out struct {
		Session session `json:"session"`
	}
	status, err := p.do(ctx, &p.c, op, id, http.MethodGet, sessionPath(sess), nil, &out, http.StatusNotFound)
	if err != nil {
		return providers.Status{}, err
	}
	st := providers.Status{Instance: id, ObservedAt: p.now()}
	s := strings.TrimPrefix(out.Session.Status, "SESSION_STATUS_")
	switch {
	case status == http.StatusNotFound:
		st.State, st.Detail = providers.Missing, "GET /v2/agents/sessions/{id}: 404"
		return st, nil
	case s == "DESTROYED":
		st.State, st.Detail = providers.Missing, "session status DESTROYED"
		return st, nil
	case sandbox != "" && out.Session.SandboxID != "" && out.Session.SandboxID != sandbox:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: "sandbox-changed",
			Err: fmt.Errorf("session %s now runs sandbox %s, not %s (rolled back or replaced outside Lifeboat); register the workspace with instance %s/%s",
				sess, out.Session.SandboxID, sandbox, sess, out.Session.SandboxID)}
	case s == "READY" || s == "DETACHED":
		st.State = providers.Running
	case s == "PAUSED":
		st.State = providers.Stopped
	default:
		return providers.Status{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict, Code: out.Session.Status,
			Err: fmt.Errorf("session %s is %s, neither running nor paused", sess, out.Session.Status)}
	}
	st.Detail = "session status " + s + ", sandbox " + out.Session.SandboxID
	return st, nil
}

// Create implements providers.Provider: unsupported (a replacement session
// could not be filled: the API has no file transfer).
func (p *Provider) Create(context.Context, providers.CreateSpec) (providers.InstanceID, error) {
	return "", httpapi.Unsupported(Name, "create", "", "the managed-agents adapter cannot create sessions (a replacement could not be filled: the API has no file transfer)")
}

// Destroy implements providers.Provider: unsupported (Lifeboat never made
// the session).
func (p *Provider) Destroy(_ context.Context, id providers.InstanceID) error {
	return httpapi.Unsupported(Name, "destroy", id, "the managed-agents adapter does not destroy sessions; remove them on the platform")
}

// Exec implements providers.Provider: unsupported.
func (p *Provider) Exec(_ context.Context, id providers.InstanceID, _ []string, _ io.Reader) (providers.ExecResult, error) {
	return providers.ExecResult{}, httpapi.Unsupported(Name, "exec", id, "the managed-agents API offers no command execution this adapter uses")
}

// Checkpoint implements providers.Provider: POST .../checkpoints, which
// answers once the checkpoint is READY (409 while a turn is in flight).
// The id returned is "<session_id>/<checkpoint_id>".
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	const op = "checkpoint"
	sess, _, err := splitInstance(op, id)
	if err != nil {
		return "", err
	}
	var out struct {
		Checkpoint checkpoint `json:"checkpoint"`
	}
	if _, err := p.do(ctx, &p.long, op, id, http.MethodPost, sessionPath(sess)+"/checkpoints", map[string]string{"label": p.cfg.Label}, &out); err != nil {
		return "", err
	}
	cp := out.Checkpoint
	switch {
	case cp.CheckpointID == "":
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable, Err: errNoCheckpointID}
	case cp.Status != "" && cp.Status != "READY":
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable, Code: cp.Status,
			Err: fmt.Errorf("checkpoint %s is %s: %s", cp.CheckpointID, cp.Status, cp.ErrorMessage)}
	}
	return providers.CheckpointID(sess + "/" + cp.CheckpointID), nil
}

func splitCheckpoint(op string, cp providers.CheckpointID) (sess, id string, err error) {
	sess, id, ok := strings.Cut(string(cp), "/")
	if !ok || sess == "" || id == "" || strings.Contains(id, "/") {
		return "", "", &providers.Error{Provider: Name, Op: op, Kind: providers.KindInvalid,
			Err: fmt.Errorf("checkpoint id %q is not <session_id>/<checkpoint_id>", cp)}
	}
	return sess, id, nil
}

func checkpointPath(sess, id string) string {
	return sessionPath(sess) + "/checkpoints/" + url.PathEscape(id)
}

// Rollback implements providers.Provider: POST .../rollback, which boots a
// fresh sandbox from the checkpoint and swaps the session onto it; the
// instance id returned names the new sandbox. A checkpoint of another
// session is refused (invalid); a deleted one is a conflict.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	const op = "rollback"
	sess, _, err := splitInstance(op, id)
	if err != nil {
		return "", err
	}
	cpSess, cpID, err := splitCheckpoint(op, cp)
	if err != nil {
		return "", err
	}
	if cpSess != sess {
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid,
			Err: fmt.Errorf("checkpoint %s belongs to session %s, not %s", cp, cpSess, sess)}
	}
	var out struct {
		Session session `json:"session"`
	}
	if _, err := p.do(ctx, &p.long, op, id, http.MethodPost, checkpointPath(sess, cpID)+"/rollback", nil, &out); err != nil {
		return "", err
	}
	if out.Session.SessionID == "" {
		out.Session.SessionID = sess
	}
	return instanceOf(out.Session), nil
}

// DeleteCheckpoint implements providers.Provider: DELETE on the
// checkpoint, idempotent on the platform; a 404 (its session gone) is
// "already gone" too.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	const op = "delete checkpoint"
	sess, id, err := splitCheckpoint(op, cp)
	if err != nil {
		return err
	}
	_, err = p.do(ctx, &p.c, op, "", http.MethodDelete, checkpointPath(sess, id), nil, nil, http.StatusNotFound)
	return err
}

// Pause implements providers.Pauser: POST .../pause (501, a substrate
// without pause, is unsupported).
func (p *Provider) Pause(ctx context.Context, id providers.InstanceID) error {
	return p.post(ctx, "pause", id, "/pause")
}

// Resume implements providers.Pauser: POST .../resume, which answers once
// the sandbox is ready.
func (p *Provider) Resume(ctx context.Context, id providers.InstanceID) error {
	return p.post(ctx, "resume", id, "/resume")
}

func (p *Provider) post(ctx context.Context, op string, id providers.InstanceID, suffix string) error {
	sess, _, err := splitInstance(op, id)
	if err != nil {
		return err
	}
	_, err = p.do(ctx, &p.long, op, id, http.MethodPost, sessionPath(sess)+suffix, nil, nil)
	return err
}
