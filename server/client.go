package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"lifeboat/internal/osutil"
	"lifeboat/prune"
	"lifeboat/recovery"
)

// Client talks to a running `lifeboat serve` over its HTTP API; the CLI
// uses it when it is pointed at a server (--server, or the config's
// [server] url). Every method answers with the API's own types; an error
// answer is an *APIError.
type Client struct {
	// BaseURL is the server's address, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Token is the bearer token sent with every request.
	Token string
	// HTTP is the client used; default one without a timeout (a capture or
	// a prune answers when it has ended).
	HTTP *http.Client
}

// APIError is an error answer of the server.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Is lets callers test an answer with the errors the server itself uses:
// errors.Is(err, recovery.ErrUnknownWorkspace), ErrRecovering, ...
func (e *APIError) Is(target error) bool {
	for _, c := range errorCodes {
		// A server's own cancellation is not this process being
		// interrupted.
		if c.err == context.Canceled || c.err == context.DeadlineExceeded {
			continue
		}
		if c.code == e.Code && c.err == target {
			return true
		}
	}
	return false
}

// NewIdempotencyKey returns a random key for one action.
func NewIdempotencyKey() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "cli-" + hex.EncodeToString(b)
}

func (c *Client) do(ctx context.Context, method, path string, hdr http.Header, body, out any) error {
	var rd io.Reader
	if body != nil {
		if raw, ok := body.([]byte); ok {
			rd = bytes.NewReader(raw)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("server address %q: %w", c.BaseURL, err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	res, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("reaching the lifeboat server at %s: %w (%s)", c.BaseURL, err, unreachableHint(err))
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	if res.StatusCode >= 300 {
		ae := &APIError{Status: res.StatusCode}
		if json.Unmarshal(b, ae) != nil || ae.Code == "" {
			ae.Code, ae.Message = "unexpected", strings.TrimSpace(string(b))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("the answer of %s %s is not the expected JSON: %w", method, path, err)
	}
	return nil
}

func keyHeader(key string) http.Header { return http.Header{"Idempotency-Key": {key}} }

func ws(id string) string { return "/v1/workspaces/" + url.PathEscape(id) }

// WorkspaceView is a workspace as the API shows it.
type WorkspaceView = workspaceView

// AddWorkspace is POST /v1/workspaces.
type AddWorkspace = addWorkspaceRequest

// ChangeWorkspace is PATCH /v1/workspaces/{ws}; nil fields stay.
type ChangeWorkspace = changeWorkspaceRequest

// Workspaces lists every workspace.
func (c *Client) Workspaces(ctx context.Context) ([]WorkspaceView, error) {
	var out []WorkspaceView
	return out, c.do(ctx, "GET", "/v1/workspaces", nil, nil, &out)
}

// Workspace returns one workspace.
func (c *Client) Workspace(ctx context.Context, id string) (WorkspaceView, error) {
	var out WorkspaceView
	return out, c.do(ctx, "GET", ws(id), nil, nil, &out)
}

// Checkpoints returns a workspace's promoted checkpoints, oldest first.
func (c *Client) Checkpoints(ctx context.Context, id string) ([]recovery.Checkpoint, error) {
	var out []recovery.Checkpoint
	return out, c.do(ctx, "GET", ws(id)+"/checkpoints", nil, nil, &out)
}

// AddWorkspace registers a workspace.
func (c *Client) AddWorkspace(ctx context.Context, req AddWorkspace) (WorkspaceView, error) {
	var out WorkspaceView
	return out, c.do(ctx, "POST", "/v1/workspaces", nil, req, &out)
}

// ChangeWorkspace changes a workspace.
func (c *Client) ChangeWorkspace(ctx context.Context, id string, req ChangeWorkspace) (WorkspaceView, error) {
	var out WorkspaceView
	return out, c.do(ctx, "PATCH", ws(id), nil, req, &out)
}

// SetPolicy sets (p non-nil) or clears a workspace's retention policy.
func (c *Client) SetPolicy(ctx context.Context, id string, p *prune.Policy) (WorkspaceView, error) {
	raw := json.RawMessage("null")
	if p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return WorkspaceView{}, err
		}
		raw = b
	}
	return c.ChangeWorkspace(ctx, id, ChangeWorkspace{Policy: raw})
}

// RemoveWorkspace stops managing a workspace; forget also removes its
// checkpoints.
func (c *Client) RemoveWorkspace(ctx context.Context, id string, forget bool) (recovery.Removed, error) {
	var out recovery.Removed
	q := ""
	if forget {
		q = "?forget_checkpoints=true"
	}
	return out, c.do(ctx, "DELETE", ws(id)+q, nil, nil, &out)
}

// Capture takes a checkpoint now and returns its receipt.
func (c *Client) Capture(ctx context.Context, id string) (recovery.Receipt, error) {
	var out recovery.Receipt
	return out, c.do(ctx, "POST", ws(id)+"/checkpoints", nil, nil, &out)
}

// Park captures before the sandbox is parked (throttled).
func (c *Client) Park(ctx context.Context, id string) (recovery.Receipt, error) {
	var out recovery.Receipt
	return out, c.do(ctx, "POST", ws(id)+"/park", nil, nil, &out)
}

// Restart rolls the workspace back to its stored provider checkpoint.
func (c *Client) Restart(ctx context.Context, id string) (recovery.RestartReceipt, error) {
	var out recovery.RestartReceipt
	return out, c.do(ctx, "POST", ws(id)+"/restart", nil, nil, &out)
}

// Check inspects the workspace's instance now.
func (c *Client) Check(ctx context.Context, id string) (RecoveryState, error) {
	var out RecoveryState
	return out, c.do(ctx, "POST", ws(id)+"/check", nil, nil, &out)
}

// RecoveryState returns the workspace's recovery state.
func (c *Client) RecoveryState(ctx context.Context, id string) (RecoveryState, error) {
	var out RecoveryState
	return out, c.do(ctx, "GET", ws(id)+"/recovery", nil, nil, &out)
}

// Offer returns the recovery offer of a lost workspace.
func (c *Client) Offer(ctx context.Context, id string) (Offer, error) {
	var out Offer
	return out, c.do(ctx, "GET", ws(id)+"/recovery/offer", nil, nil, &out)
}

// Approve approves the recovery of a workspace from checkpoint, once per
// key.
func (c *Client) Approve(ctx context.Context, id, checkpoint, key string) (Operation, error) {
	var out Operation
	return out, c.do(ctx, "POST", ws(id)+"/recovery/approve", keyHeader(key), approveRequest{Checkpoint: checkpoint}, &out)
}

// Operation returns one recovery operation.
func (c *Client) Operation(ctx context.Context, id string) (Operation, error) {
	var out Operation
	return out, c.do(ctx, "GET", "/v1/operations/"+url.PathEscape(id), nil, nil, &out)
}

// Operations lists recovery operations (of one workspace, or all).
func (c *Client) Operations(ctx context.Context, workspace string) ([]Operation, error) {
	var out []Operation
	q := ""
	if workspace != "" {
		q = "?workspace=" + url.QueryEscape(workspace)
	}
	return out, c.do(ctx, "GET", "/v1/operations"+q, nil, nil, &out)
}

// WaitOperation polls an operation until it ends (recovered or failed)
// or ctx ends, every interval.
func (c *Client) WaitOperation(ctx context.Context, id string, every time.Duration) (Operation, error) {
	for {
		op, err := c.Operation(ctx, id)
		if err != nil || op.Step == string(recovery.OpRecovered) || op.Step == string(recovery.OpFailed) {
			return op, err
		}
		if err := osutil.Sleep(ctx, every); err != nil {
			return op, err
		}
	}
}

// RepairHolds lists repair holds: state is open, resolved or all.
func (c *Client) RepairHolds(ctx context.Context, state string) ([]RepairHold, error) {
	var out []RepairHold
	return out, c.do(ctx, "GET", "/v1/repair-holds?state="+url.QueryEscape(state), nil, nil, &out)
}

// RepairHold returns one hold with its allocation as the provider reports
// it now.
func (c *Client) RepairHold(ctx context.Context, id string) (RepairHoldDetail, error) {
	var out RepairHoldDetail
	return out, c.do(ctx, "GET", "/v1/repair-holds/"+url.PathEscape(id), nil, nil, &out)
}

// StopRepairHold stops the allocation a hold keeps.
func (c *Client) StopRepairHold(ctx context.Context, id string) (RepairHold, error) {
	var out RepairHold
	return out, c.do(ctx, "POST", "/v1/repair-holds/"+url.PathEscape(id)+"/stop", nil, nil, &out)
}

// ResolveHold records an operator's resolution of a hold.
func (c *Client) ResolveHold(ctx context.Context, id, outcome, evidence string) (RepairHold, error) {
	var out RepairHold
	return out, c.do(ctx, "POST", "/v1/repair-holds/"+url.PathEscape(id)+"/resolve", nil,
		resolveRequest{Outcome: outcome, Evidence: evidence}, &out)
}

// RegisterProcess records a command the host runs in the workspace.
func (c *Client) RegisterProcess(ctx context.Context, id string, argv []string, dir string) (recovery.RegisteredProcess, error) {
	var out recovery.RegisteredProcess
	return out, c.do(ctx, "POST", ws(id)+"/processes", nil, registerProcessRequest{Command: argv, Dir: dir}, &out)
}

// ProcessOutput appends output to a registered process.
func (c *Client) ProcessOutput(ctx context.Context, id, proc string, out []byte) error {
	return c.do(ctx, "POST", ws(id)+"/processes/"+url.PathEscape(proc)+"/output",
		http.Header{"Content-Type": {"application/octet-stream"}}, out, nil)
}

// ProcessExit records a registered process's exit.
func (c *Client) ProcessExit(ctx context.Context, id, proc string, code int) (recovery.RegisteredProcess, error) {
	var out recovery.RegisteredProcess
	return out, c.do(ctx, "POST", ws(id)+"/processes/"+url.PathEscape(proc)+"/exit", nil, processExitRequest{ExitCode: &code}, &out)
}

// RegisteredProcesses lists the processes registered in a workspace now.
func (c *Client) RegisteredProcesses(ctx context.Context, id string) ([]recovery.RegisteredProcess, error) {
	var out []recovery.RegisteredProcess
	return out, c.do(ctx, "GET", ws(id)+"/processes?state=registered", nil, nil, &out)
}

// LostProcesses lists the processes the last recovery of a workspace lost.
func (c *Client) LostProcesses(ctx context.Context, id string) ([]LostProcess, error) {
	var out []LostProcess
	return out, c.do(ctx, "GET", ws(id)+"/processes", nil, nil, &out)
}

// RestartProcess restarts a lost process, once per key.
func (c *Client) RestartProcess(ctx context.Context, id, proc, key string) (ProcessRestart, error) {
	var out ProcessRestart
	return out, c.do(ctx, "POST", ws(id)+"/processes/"+url.PathEscape(proc)+"/restart", keyHeader(key), nil, &out)
}

// Prune runs forget by policy and prune now, and returns the report.
func (c *Client) Prune(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, "POST", "/v1/prune", nil, nil, &out)
}

// httpClient is c.HTTP, or http.DefaultClient when that is nil.
func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Metrics returns the Prometheus text of GET /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(c.BaseURL, "/")+"/metrics", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	res, err := c.httpClient().Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = errors.New("GET /metrics: " + res.Status)
	}
	return string(b), err
}

// unreachableHint says what to check when a request got no answer: the
// server's certificate when TLS refused it, else whether it runs.
func unreachableHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &unknown):
		return "the server's TLS certificate is not trusted on this host: add the CA that signed it to the system's trusted roots, or name its file in SSL_CERT_FILE"
	case errors.As(err, &host):
		return "the server's TLS certificate is not for this host name: reach the server by a name the certificate holds ([server] url or --server)"
	case errors.As(err, &cv):
		return "the server's TLS certificate was refused (expired, not yet valid, or not for serving): renew it on the server"
	}
	return "is `lifeboat serve` running there?"
}
