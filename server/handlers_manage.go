package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lifeboat/providers"
	"lifeboat/prune"
	"lifeboat/recovery"
)

// PolicySetter stores or clears a workspace's retention policy in the
// repository (the `policy` of POST and PATCH /v1/workspaces).
type PolicySetter interface {
	SetPolicy(ctx context.Context, ws string, p *prune.Policy) error
}

// addWorkspaceRequest registers a workspace.
type addWorkspaceRequest struct {
	ID               string        `json:"id"`
	Provider         string        `json:"provider"` // a provider instance name of the server's config
	Instance         string        `json:"instance"` // the provider's native id; default id
	ParkInterval     string        `json:"park_interval"`
	PeriodicInterval string        `json:"periodic_interval"`
	Policy           *prune.Policy `json:"policy"`
}

// changeWorkspaceRequest changes a workspace; absent fields stay.
type changeWorkspaceRequest struct {
	Instance         *string         `json:"instance"`
	ParkInterval     *string         `json:"park_interval"`     // "" or "default": the server's default
	PeriodicInterval *string         `json:"periodic_interval"` // likewise
	Policy           json.RawMessage `json:"policy,omitempty"`  // an object sets it, null clears it, absent keeps it
}

// interval parses an interval of a request: "" and "default" are 0 (the
// server's default).
func interval(field, s string) (time.Duration, error) {
	if s == "" || s == "default" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, badRequest(fmt.Sprintf("%s %q: want a positive duration such as \"10m\" or \"1h30m\", or \"default\"", field, s))
	}
	return d, nil
}

func (s *Server) addWorkspace(w http.ResponseWriter, r *http.Request) error {
	var req addWorkspaceRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	noteWorkspace(r, req.ID)
	if req.ID == "" || req.Provider == "" {
		return badRequest(`registering a workspace needs its id and provider instance: {"id": "bot1", "provider": "NAME", "instance": "NATIVE-ID"}`)
	}
	if _, ok := s.rec.Provider(req.Provider); !ok {
		names := s.providerNames()
		if len(names) == 0 {
			return &apiError{http.StatusBadRequest, "unknown_provider", fmt.Sprintf("provider %q is not configured in this server, which has no provider instance: add a [providers.NAME] table to its config (docs/configuration.md) and restart it", req.Provider)}
		}
		return &apiError{http.StatusBadRequest, "unknown_provider", fmt.Sprintf("provider %q is not configured in this server; configured: %s", req.Provider, strings.Join(names, ", "))}
	}
	park, err := interval("park_interval", req.ParkInterval)
	if err != nil {
		return err
	}
	periodic, err := interval("periodic_interval", req.PeriodicInterval)
	if err != nil {
		return err
	}
	if err := s.checkPolicy(req.Policy); err != nil {
		return err
	}
	ws, err := s.rec.AddWorkspace(r.Context(), recovery.NewWorkspace{ID: req.ID, Provider: req.Provider,
		Instance: providers.InstanceID(req.Instance), Settings: recovery.Settings{ParkInterval: park, PeriodicInterval: periodic}})
	if err != nil {
		return err
	}
	if req.Policy != nil {
		if err := s.policies.SetPolicy(r.Context(), ws.ID, req.Policy); err != nil {
			return fmt.Errorf("workspace %s registered, but storing its retention policy failed (set it again with PATCH): %w", ws.ID, err)
		}
	}
	v, err := s.view(r.Context(), ws)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/workspaces/"+ws.ID)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

func (s *Server) checkPolicy(p *prune.Policy) error {
	if p == nil {
		return nil
	}
	if s.policies == nil {
		return &apiError{http.StatusServiceUnavailable, "policies_unavailable", "this server cannot store retention policies (it was started without a repository)"}
	}
	if err := p.Validate(); err != nil {
		return badRequest("policy: " + err.Error())
	}
	if p.Empty() {
		return badRequest("policy: it has no keep_* rule, so it would keep only the last good checkpoint; give at least one rule, or null to remove the stored policy")
	}
	return nil
}

func (s *Server) providerNames() []string {
	return s.rec.ProviderNames()
}

func (s *Server) changeWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	var req changeWorkspaceRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	var c recovery.WorkspaceChange
	if req.Instance != nil {
		if *req.Instance == "" {
			return badRequest("instance: the new instance id must not be empty")
		}
		inst := providers.InstanceID(*req.Instance)
		c.Instance = &inst
	}
	for _, f := range []struct {
		name string
		in   *string
		out  **time.Duration
	}{{"park_interval", req.ParkInterval, &c.ParkInterval}, {"periodic_interval", req.PeriodicInterval, &c.PeriodicInterval}} {
		if f.in != nil {
			d, err := interval(f.name, *f.in)
			if err != nil {
				return err
			}
			*f.out = &d
		}
	}
	var pol *prune.Policy
	clearPolicy := len(req.Policy) > 0 && bytes.Equal(bytes.TrimSpace(req.Policy), []byte("null"))
	if len(req.Policy) > 0 && !clearPolicy {
		d := json.NewDecoder(bytes.NewReader(req.Policy))
		d.DisallowUnknownFields()
		pol = new(prune.Policy)
		if err := d.Decode(pol); err != nil {
			return badRequest("policy: " + err.Error())
		}
		if err := s.checkPolicy(pol); err != nil {
			return err
		}
	} else if clearPolicy && s.policies == nil {
		return s.checkPolicy(&prune.Policy{})
	}
	got, err := s.rec.ChangeWorkspace(r.Context(), ws.ID, c)
	if err != nil {
		return err
	}
	if pol != nil || clearPolicy {
		if err := s.policies.SetPolicy(r.Context(), ws.ID, pol); err != nil {
			return fmt.Errorf("workspace %s changed, but storing its retention policy failed: %w", ws.ID, err)
		}
	}
	v, err := s.view(r.Context(), got)
	return reply(w, http.StatusOK, v, err)
}

func (s *Server) removeWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	forget := false
	if v := r.URL.Query().Get("forget_checkpoints"); v != "" {
		if forget, err = strconv.ParseBool(v); err != nil {
			return badRequest(fmt.Sprintf("forget_checkpoints=%q: want true or false", v))
		}
	}
	if forget {
		if err := authorize(RoleOperator, callerOf(r).role); err != nil {
			return err
		}
	}
	res, err := s.rec.RemoveWorkspace(r.Context(), ws.ID, forget)
	return reply(w, http.StatusOK, res, err)
}

// checkNow inspects the workspace's instance at once.
func (s *Server) checkNow(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	st, err := s.api.Check(r.Context(), ws.ID)
	return reply(w, http.StatusOK, st, err)
}

// restartWorkspace rolls the workspace back to its stored provider
// checkpoint (rollback restart).
func (s *Server) restartWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.botOperation(r)
	if err != nil {
		return err
	}
	rr, err := s.rec.Restart(context.WithoutCancel(r.Context()), ws.ID)
	return reply(w, http.StatusOK, rr, err)
}

type registerProcessRequest struct {
	Command []string `json:"command"`
	Dir     string   `json:"dir"`
}

// registerProcess records a command the host server runs in the
// workspace; its output is appended while it runs, its exit recorded.
func (s *Server) registerProcess(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	var req registerProcessRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return badRequest(`a process needs its command: {"command": ["npm", "run", "dev"], "dir": "/workspace/app"}`)
	}
	p, err := s.rec.StartProcess(ws.ID, req.Command, req.Dir)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.rec.Record(p))
	return nil
}

// maxOutputBody bounds one append of a process's output.
const maxOutputBody = 1 << 20

// registered looks up the workspace and registered process of the path.
func (s *Server) registered(r *http.Request) (*recovery.Process, error) {
	ws, err := s.workspace(r)
	if err != nil {
		return nil, err
	}
	return s.rec.Process(ws.ID, r.PathValue("proc"))
}

// processOutput appends the request body to a registered process's
// output (only its tail is kept).
func (s *Server) processOutput(w http.ResponseWriter, r *http.Request) error {
	p, err := s.registered(r)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxOutputBody+1))
	if errors.Is(err, errBodyTimeout) {
		return errBodyTimeout
	}
	if err != nil {
		return badRequest("reading the output: " + err.Error())
	}
	if len(b) > maxOutputBody {
		return &apiError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("append at most %d bytes of output per request", maxOutputBody)}
	}
	_, _ = p.Write(b)
	writeJSON(w, http.StatusOK, s.rec.Record(p))
	return nil
}

type processExitRequest struct {
	ExitCode *int `json:"exit_code"`
}

func (s *Server) processExit(w http.ResponseWriter, r *http.Request) error {
	p, err := s.registered(r)
	if err != nil {
		return err
	}
	var req processExitRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.ExitCode == nil {
		return badRequest(`an exit needs the exit code: {"exit_code": 0}`)
	}
	p.Exit(*req.ExitCode, time.Now())
	writeJSON(w, http.StatusOK, s.rec.Record(p))
	return nil
}

// pruneNow runs forget by policy and prune now, and answers with the
// report when they have ended.
func (s *Server) pruneNow(w http.ResponseWriter, r *http.Request) error {
	if s.maint == nil {
		return &apiError{http.StatusServiceUnavailable, "maintenance_unavailable", "this server was started without a repository to prune"}
	}
	rep, err := s.maint.Maintain(context.WithoutCancel(r.Context()))
	return reply(w, http.StatusOK, rep, err)
}

// metrics serves the Prometheus text format.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) error {
	if s.metricsH == nil {
		return &apiError{http.StatusNotFound, "no_such_route", "this server has no metrics"}
	}
	s.metricsH.Handler().ServeHTTP(w, r)
	return nil
}
