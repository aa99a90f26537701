// Package matest is a contract server for the managed-agents adapter,
// built from DigitalOcean's public API reference for Harness Runtime
// sessions (https://docs.digitalocean.com/reference/api/, routes under
// /v2/agents/sessions, mirrored in the pydo "harness" and DoTs
// "harness-runtime" references): GetSession, CreateCheckpoint (synchronous,
// READY; 409 while a turn is in flight), DeleteCheckpoint (idempotent,
// {"checkpoint_id","deleted":true}), RollbackToCheckpoint (a fresh sandbox,
// the session keeps its id and gets the new sandbox_id), PostSessionPause
// and PostSessionResume. Errors use DigitalOcean's body
// {"id":"not_found","message":...}. Authorization is "Bearer <token>".
//
// A session's "machine state" is a string the test sets (Data); a
// checkpoint copies it and a rollback puts it back, so a test can see what
// a rollback restored. For tests only.
package matest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Session is one session the server holds.
type Session struct {
	ID          string
	Status      string // SESSION_STATUS_READY, _PAUSED, _DESTROYED, ...
	SandboxID   string
	Data        string            // the machine state a checkpoint keeps
	Checkpoints map[string]string // checkpoint id -> Data at the checkpoint
	TurnActive  bool              // a checkpoint now answers 409
}

// Server is the contract server.
type Server struct {
	*httptest.Server
	Token string

	mu       sync.Mutex
	sessions map[string]*Session
	next     int
	fault    func(w http.ResponseWriter, r *http.Request) bool
}

// Start starts a server accepting token; it is closed when t ends.
func Start(t testing.TB, token string) *Server {
	s := &Server{Token: token, sessions: map[string]*Session{}}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// Add makes a READY session with a first sandbox and returns its
// instance id ("<session>/<sandbox>").
func (s *Server) Add(id, data string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	sb := fmt.Sprintf("sbx-%d", s.next)
	s.sessions[id] = &Session{ID: id, Status: "SESSION_STATUS_READY", SandboxID: sb, Data: data, Checkpoints: map[string]string{}}
	return id + "/" + sb
}

// Update changes session id under the server's lock.
func (s *Server) Update(id string, fn func(*Session)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[id]; ss != nil {
		fn(ss)
	}
}

// Remove deletes session id (the platform removing it).
func (s *Server) Remove(id string) {
	s.mu.Lock()
	delete(s.sessions, id)
	s.mu.Unlock()
}

// Get returns a copy of session id.
func (s *Server) Get(id string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		return Session{}, false
	}
	c := *ss
	c.Checkpoints = map[string]string{}
	for k, v := range ss.Checkpoints {
		c.Checkpoints[k] = v
	}
	return c, true
}

// SetFault makes fn answer every request first (it returns true when it
// did); nil removes it.
func (s *Server) SetFault(fn func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.fault = fn
	s.mu.Unlock()
}

func doError(w http.ResponseWriter, status int, id, msg string) {
	writeJSON(w, status, map[string]string{"id": id, "message": msg, "request_id": "req-contract"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (ss *Session) view() map[string]any {
	return map[string]any{"session": map[string]any{"session_id": ss.ID, "name": ss.ID, "status": ss.Status, "sandbox_id": ss.SandboxID,
		"agent_kind": "AGENT_KIND_UNSPECIFIED", "created_at": "2026-08-01T12:00:00Z", "warnings": []string{}}}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		doError(w, http.StatusUnauthorized, "unauthorized", "Unable to authenticate you")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v2/agents/sessions/")
	if !ok {
		doError(w, http.StatusNotFound, "not_found", "The resource you requested could not be found.")
		return
	}
	parts := strings.Split(rest, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[parts[0]]
	if ss == nil {
		doError(w, http.StatusNotFound, "not_found", "session not found")
		return
	}
	switch {
	case len(parts) == 1 && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, ss.view())
	case len(parts) == 2 && parts[1] == "checkpoints" && r.Method == http.MethodPost:
		var body struct {
			Label string `json:"label"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			doError(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		if ss.TurnActive {
			doError(w, http.StatusConflict, "conflict", "a turn is in flight; checkpoints are taken between turns")
			return
		}
		s.next++
		cp := fmt.Sprintf("cp_%04d", s.next)
		ss.Checkpoints[cp] = ss.Data
		writeJSON(w, http.StatusOK, map[string]any{"checkpoint": map[string]any{"checkpoint_id": cp, "session_id": ss.ID, "status": "READY",
			"kind": "explicit", "label": body.Label, "size_bytes": len(ss.Data), "created_at": time.Now().UTC().Format(time.RFC3339)}})
	case len(parts) == 3 && parts[1] == "checkpoints" && r.Method == http.MethodDelete:
		delete(ss.Checkpoints, parts[2])
		writeJSON(w, http.StatusOK, map[string]any{"checkpoint_id": parts[2], "deleted": true})
	case len(parts) == 4 && parts[1] == "checkpoints" && parts[3] == "rollback" && r.Method == http.MethodPost:
		data, ok := ss.Checkpoints[parts[2]]
		if !ok {
			doError(w, http.StatusNotFound, "not_found", "checkpoint not found")
			return
		}
		s.next++
		ss.SandboxID, ss.Data, ss.Status = fmt.Sprintf("sbx-%d", s.next), data, "SESSION_STATUS_READY"
		writeJSON(w, http.StatusOK, ss.view())
	case len(parts) == 2 && parts[1] == "pause" && r.Method == http.MethodPost:
		ss.Status = "SESSION_STATUS_PAUSED"
		w.WriteHeader(http.StatusNoContent)
	case len(parts) == 2 && parts[1] == "resume" && r.Method == http.MethodPost:
		ss.Status = "SESSION_STATUS_READY"
		w.WriteHeader(http.StatusNoContent)
	default:
		doError(w, http.StatusNotFound, "not_found", "The resource you requested could not be found.")
	}
}
