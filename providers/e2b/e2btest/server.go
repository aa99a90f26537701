// Package e2btest is a contract server for the e2b adapter: one HTTP
// server answering both of E2B's planes as E2B documents them, for tests
// (the adapter's own and `lifeboat serve` end to end). References, in
// github.com/e2b-dev/E2B: spec/openapi.yml (the control plane:
// /sandboxes, /v2/sandboxes, pause, resume, POST /sandboxes/{id}/snapshots,
// DELETE /templates/{id} for a snapshot, a snapshot id accepted as the
// template of POST /sandboxes, as packages/js-sdk's sandboxApi.ts uses
// them; X-API-Key), spec/envd/envd.yaml
// (GET and POST /files, multipart field "file", username and path query
// parameters, paths relative to the user's home) and
// spec/envd/process/process.proto (process.Process/Start as a Connect
// server stream, JSON codec); packages/python-sdk/e2b/connection_config.py
// for the E2B_SANDBOX_URL mode, in which envd requests name their sandbox
// in the E2b-Sandbox-Id header. The edge's answer for a sandbox it cannot
// route is the documented {"sandboxId":..,"message":"The sandbox was not
// found","code":502}.
//
// Each sandbox's filesystem is a directory on this machine (its home
// /home/user inside it; snapshots keep only the home), and commands really
// run there (with /bin/sh and the host's GNU tar): the server maps the
// paths and working directories it is given, it does not confine the
// commands (an absolute path in a command's arguments is this machine's).
// It is for tests only.
package e2btest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Home is the sandbox user's home directory as the sandbox sees it.
const Home = "/home/user"

// Sandbox is one sandbox the server holds.
type Sandbox struct {
	ID       string            `json:"sandboxID"`
	Template string            `json:"templateID"`
	State    string            `json:"state"` // running or paused
	Metadata map[string]string `json:"metadata"`
	Token    string            `json:"envdAccessToken"`
	Domain   *string           `json:"domain"`
}

// Server is the contract server.
type Server struct {
	*httptest.Server
	APIKey string
	root   string

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
	snapshots map[string]bool // snapshot ids; their homes are under root/snapshots
	next      int
	fault     func(w http.ResponseWriter, r *http.Request) bool
}

// Start starts a server accepting apiKey; it is closed when t ends.
func Start(t testing.TB, apiKey string) *Server {
	s := &Server{APIKey: apiKey, root: t.TempDir(), sandboxes: map[string]*Sandbox{}, snapshots: map[string]bool{}}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// SetFault makes fn answer every request first (it returns true when it
// did); nil removes it.
func (s *Server) SetFault(fn func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	s.fault = fn
	s.mu.Unlock()
}

// rootDir is where sandbox id's / lives on this machine.
func (s *Server) rootDir(id string) string { return filepath.Join(s.root, id, "fs") }

// HomeDir is where sandbox id's home directory (Home) lives on this
// machine.
func (s *Server) HomeDir(id string) string {
	return filepath.Join(s.rootDir(id), filepath.FromSlash(Home))
}

// WorkspaceDir is the default workspace of sandbox id on this machine.
func (s *Server) WorkspaceDir(id string) string { return filepath.Join(s.HomeDir(id), "workspace") }

// Add makes a running sandbox with id, as if created outside Lifeboat.
func (s *Server) Add(id string) *Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(id, "base", nil)
}

func (s *Server) addLocked(id, template string, meta map[string]string) *Sandbox {
	if meta == nil {
		meta = map[string]string{}
	}
	sb := &Sandbox{ID: id, Template: template, State: "running", Metadata: meta, Token: "envd-" + id}
	s.sandboxes[id] = sb
	_ = os.MkdirAll(s.HomeDir(id), 0o755)
	return sb
}

// Remove deletes sandbox id behind the adapter's back (E2B killing it at
// its timeout).
func (s *Server) Remove(id string) {
	s.mu.Lock()
	delete(s.sandboxes, id)
	s.mu.Unlock()
}

// SetState sets sandbox id's state ("running", "paused").
func (s *Server) SetState(id, state string) {
	s.mu.Lock()
	if sb := s.sandboxes[id]; sb != nil {
		sb.State = state
	}
	s.mu.Unlock()
}

// Lookup returns a copy of sandbox id.
func (s *Server) Lookup(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return Sandbox{}, false
	}
	return *sb, true
}

// IDs lists the sandboxes.
func (s *Server) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.sandboxes))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		s.envd(w, r, id)
		return
	}
	if r.Header.Get("X-API-Key") != s.APIKey {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"code": 401, "message": "Invalid API key"})
		return
	}
	s.control(w, r)
}

func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rest, isSandbox := strings.CutPrefix(r.URL.Path, "/sandboxes/")
	id, action, _ := strings.Cut(rest, "/")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v2/sandboxes":
		k, v, _ := strings.Cut(r.URL.Query().Get("metadata"), "=")
		out := []Sandbox{}
		for _, sb := range s.sandboxes {
			if sb.Metadata[k] == v {
				out = append(out, *sb)
			}
		}
		writeJSON(w, http.StatusOK, out)
	case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
		var body struct {
			Template string            `json:"templateID"`
			Metadata map[string]string `json:"metadata"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "message": err.Error()})
			return
		}
		snap := strings.HasPrefix(body.Template, "snap-")
		if snap && !s.snapshots[body.Template] {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": fmt.Sprintf("template %q not found", body.Template)})
			return
		}
		s.next++
		sb := s.addLocked(fmt.Sprintf("sb%04d", s.next), body.Template, body.Metadata)
		if snap {
			if err := copyTree(s.snapshotHome(body.Template), s.HomeDir(sb.ID)); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]any{"code": 500, "message": err.Error()})
				return
			}
		}
		writeJSON(w, http.StatusCreated, sb)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/templates/"):
		id := strings.TrimPrefix(r.URL.Path, "/templates/")
		if !s.snapshots[id] {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": fmt.Sprintf("template %q not found", id)})
			return
		}
		delete(s.snapshots, id)
		_ = os.RemoveAll(filepath.Dir(s.snapshotHome(id)))
		w.WriteHeader(http.StatusNoContent)
	case !isSandbox || id == "":
		writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "no such route"})
	default:
		sb, ok := s.sandboxes[id]
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": fmt.Sprintf("sandbox %q not found", id)})
			return
		}
		switch {
		case r.Method == http.MethodGet && action == "":
			writeJSON(w, http.StatusOK, sb)
		case r.Method == http.MethodDelete && action == "":
			delete(s.sandboxes, id)
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodPost && action == "snapshots":
			s.next++
			snap := fmt.Sprintf("snap-%04d", s.next)
			if err := copyTree(s.HomeDir(id), s.snapshotHome(snap)); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]any{"code": 500, "message": err.Error()})
				return
			}
			s.snapshots[snap] = true
			writeJSON(w, http.StatusCreated, map[string]any{"snapshotID": snap, "names": []string{}})
		case r.Method == http.MethodPost && action == "pause":
			if sb.State == "paused" {
				writeJSON(w, http.StatusConflict, map[string]any{"code": 409, "message": "sandbox is already paused"})
				return
			}
			sb.State = "paused"
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodPost && action == "resume":
			var body struct {
				Timeout *int `json:"timeout"`
			}
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Timeout == nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"code": 400, "message": "timeout: value is required but missing"})
				return
			}
			if sb.State == "running" {
				writeJSON(w, http.StatusConflict, map[string]any{"code": 409, "message": "sandbox is already running"})
				return
			}
			sb.State = "running"
			writeJSON(w, http.StatusCreated, sb)
		default:
			writeJSON(w, http.StatusNotFound, map[string]any{"code": 404, "message": "no such route"})
		}
	}
}

func (s *Server) snapshotHome(id string) string {
	return filepath.Join(s.root, "snapshots", id, "home")
}

// Snapshots lists the snapshot ids the server holds.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.snapshots))
}

// copyTree copies the directory src to dst (absent) with GNU cp -a, which
// keeps modes, times, hard links, symlinks and fifos.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.RemoveAll(dst)
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
