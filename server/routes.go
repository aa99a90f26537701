package server

import (
	"net/http"
	"strings"
)

// register lists every route of the API; docs/openapi.yaml describes each
// (TestOpenAPICoversRoutes).
func (s *Server) register() {
	s.route("GET", "/v1/workspaces", RoleUser, s.listWorkspaces)
	s.route("POST", "/v1/workspaces", RoleUser, s.addWorkspace)
	s.route("GET", "/v1/workspaces/{ws}", RoleUser, s.getWorkspace)
	s.route("PATCH", "/v1/workspaces/{ws}", RoleUser, s.changeWorkspace)
	s.route("DELETE", "/v1/workspaces/{ws}", RoleUser, s.removeWorkspace)
	s.route("POST", "/v1/workspaces/{ws}/check", RoleUser, s.checkNow)
	s.route("POST", "/v1/workspaces/{ws}/restart", RoleUser, s.restartWorkspace)
	s.route("GET", "/v1/workspaces/{ws}/checkpoints", RoleUser, s.listCheckpoints)
	s.route("POST", "/v1/workspaces/{ws}/checkpoints", RoleUser, s.captureNow)
	s.route("POST", "/v1/workspaces/{ws}/park", RoleUser, s.park)
	s.route("GET", "/v1/workspaces/{ws}/recovery", RoleUser, forWorkspace(s, s.api.State))
	s.route("GET", "/v1/workspaces/{ws}/recovery/offer", RoleUser, forWorkspace(s, s.api.Offer))
	s.route("POST", "/v1/workspaces/{ws}/recovery/approve", RoleUser, s.approve)
	s.route("GET", "/v1/operations", RoleUser, s.operations)
	s.route("GET", "/v1/operations/{id}", RoleUser, s.operation)
	s.route("GET", "/v1/workspaces/{ws}/processes", RoleUser, s.processes)
	s.route("POST", "/v1/workspaces/{ws}/processes", RoleUser, s.registerProcess)
	s.route("POST", "/v1/workspaces/{ws}/processes/{proc}/output", RoleUser, s.processOutput)
	s.route("POST", "/v1/workspaces/{ws}/processes/{proc}/exit", RoleUser, s.processExit)
	s.route("POST", "/v1/workspaces/{ws}/processes/{proc}/restart", RoleUser, s.restartProcess)
	s.route("GET", "/v1/repair-holds", RoleOperator, s.repairHolds)
	s.route("GET", "/v1/repair-holds/{id}", RoleOperator, s.repairHold)
	s.route("POST", "/v1/repair-holds/{id}/stop", RoleOperator, s.stopRepairHold)
	s.route("POST", "/v1/repair-holds/{id}/resolve", RoleOperator, s.resolveHold)
	s.route("POST", "/v1/prune", RoleOperator, s.pruneNow)
	s.route("GET", "/v1/events", RoleUser, s.stream)
	s.route("GET", "/metrics", RoleUser, s.metrics)
	s.route("GET", "/{$}", RoleNone, s.page)
	s.route("GET", "/static/{file}", RoleNone, s.asset)
	// Anything else: a structured 404 or 405, after the token check (no
	// token, no answer about what exists).
	s.mux.Handle("/", s.wrap(Route{Role: RoleUser, handle: s.unknown}))
}

// unknown answers a path no route serves, or a method a path does not take.
func (s *Server) unknown(w http.ResponseWriter, r *http.Request) error {
	var allowed []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pat := s.mux.Handler(probe); pat != "/" && pat != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		return &apiError{http.StatusMethodNotAllowed, "method_not_allowed", r.Method + " is not allowed on " + r.URL.Path + "; use " + strings.Join(allowed, " or ")}
	}
	return &apiError{http.StatusNotFound, "no_such_route", "no API route " + r.URL.Path + "; see docs/openapi.yaml"}
}
