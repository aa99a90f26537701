package platformtest

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// Vercel serves the Vercel Sandbox REST API as the official SDK calls it
// (vercel/sandbox packages/vercel-sandbox/src/api-client/api-client.ts and
// validators.ts): Bearer token and ?teamId on every request; POST
// /v1/sandboxes; GET /v1/sandboxes/{id}; POST /v1/sandboxes/{id}/stop;
// POST /v1/sandboxes/{id}/cmd with wait=true answering application/x-ndjson
// (the command, then the command with its exitCode); GET
// /v1/sandboxes/{id}/cmd/{cmdId}/logs (ndjson {"stream","data"}); POST
// /v1/sandboxes/{id}/fs/write (a gzipped tar, x-cwd the extract dir); POST
// /v1/sandboxes/{id}/fs/read ({"path"} -> the bytes, 404 when absent).
// Errors use the {"error":{"code","message"}} envelope; a stopped sandbox's
// data plane answers 410 sandbox_stopped (vercel.com/docs/errors/SANDBOX_STOPPED).
func (s *Sandboxes) Vercel(teamID string) http.Handler {
	v := &vercel{s: s, team: teamID, logs: map[string][]vercelLog{}}
	return http.HandlerFunc(v.serve)
}

type vercel struct {
	s    *Sandboxes
	team string
	mu   sync.Mutex
	logs map[string][]vercelLog // command id -> its output
	next int
}

type vercelLog struct {
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

func vercelErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func vercelJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (v *vercel) sandbox(b Box) map[string]any {
	return map[string]any{"id": b.ID, "memory": 2048, "vcpus": 1, "region": "iad1", "runtime": "node22", "timeout": 300000,
		"status": b.State, "requestedAt": 0, "createdAt": 0, "updatedAt": 0, "cwd": "/vercel/sandbox"}
}

func (v *vercel) serve(w http.ResponseWriter, r *http.Request) {
	ok := v.s.gate(w, r, func(r *http.Request) bool {
		return bearer(v.s.Key)(r) && (v.team == "" || r.URL.Query().Get("teamId") == v.team)
	}, func(w http.ResponseWriter) { vercelErr(w, http.StatusForbidden, "forbidden", "Not authorized") })
	if !ok {
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/sandboxes"), "/")
	if !strings.HasPrefix(r.URL.Path, "/v1/sandboxes") {
		vercelErr(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	if len(parts) == 1 && r.Method == http.MethodPost { // POST /v1/sandboxes
		v.s.count("POST /v1/sandboxes")
		var body struct {
			ProjectID string `json:"projectId"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.ProjectID == "" {
			vercelErr(w, http.StatusBadRequest, "bad_request", "projectId is required")
			return
		}
		b, err := v.s.Add("", "running", nil)
		if err != nil {
			vercelErr(w, http.StatusInternalServerError, "internal", err.Error())
			return
		}
		_ = os.MkdirAll(b.Dir+"/vercel/sandbox", 0o755)
		vercelJSON(w, map[string]any{"sandbox": v.sandbox(b), "routes": []any{}})
		return
	}
	if len(parts) < 2 || parts[1] == "" {
		vercelErr(w, http.StatusNotFound, "not_found", "no such route")
		return
	}
	id := parts[1]
	b, found := v.s.Get(id)
	if !found {
		vercelErr(w, http.StatusNotFound, "not_found", "Sandbox not found")
		return
	}
	rest := strings.Join(parts[2:], "/")
	switch {
	case rest == "" && r.Method == http.MethodGet:
		vercelJSON(w, map[string]any{"sandbox": v.sandbox(b), "routes": []any{}})
		return
	case rest == "stop" && r.Method == http.MethodPost:
		v.s.Update(id, func(b *Box) { b.State = "stopped" })
		_ = os.RemoveAll(b.Dir) // a stopped sandbox's filesystem is gone
		b.State = "stopped"
		vercelJSON(w, map[string]any{"sandbox": v.sandbox(b)})
		return
	}
	if b.State != "running" {
		vercelErr(w, http.StatusGone, "sandbox_stopped", "Sandbox has stopped execution and is no longer available")
		return
	}
	switch {
	case rest == "cmd" && r.Method == http.MethodPost:
		v.cmd(w, r, b)
	case strings.HasPrefix(rest, "cmd/") && strings.HasSuffix(rest, "/logs") && r.Method == http.MethodGet:
		cid := strings.TrimSuffix(strings.TrimPrefix(rest, "cmd/"), "/logs")
		v.mu.Lock()
		logs, ok := v.logs[cid]
		v.mu.Unlock()
		if !ok {
			vercelErr(w, http.StatusNotFound, "not_found", "Command not found")
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for _, l := range logs {
			_ = enc.Encode(l)
		}
	case rest == "fs/write" && r.Method == http.MethodPost:
		if err := v.write(r, b); err != nil {
			vercelErr(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		vercelJSON(w, map[string]any{})
	case rest == "fs/read" && r.Method == http.MethodPost:
		var body struct {
			Path string `json:"path"`
			Cwd  string `json:"cwd"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			vercelErr(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		p := body.Path
		if !path.IsAbs(p) {
			p = path.Join(body.Cwd, p)
		}
		hp, err := v.s.HostPath(id, p)
		if err == nil {
			var f *os.File
			if f, err = os.Open(hp); err == nil {
				defer f.Close()
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = io.Copy(w, f)
				return
			}
		}
		if errors.Is(err, fs.ErrNotExist) {
			vercelErr(w, http.StatusNotFound, "file_not_found", "File not found")
			return
		}
		vercelErr(w, http.StatusInternalServerError, "internal", err.Error())
	default:
		vercelErr(w, http.StatusNotFound, "not_found", "no such route")
	}
}

func (v *vercel) cmd(w http.ResponseWriter, r *http.Request, b Box) {
	var body struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
		Cwd     string   `json:"cwd"`
		Wait    bool     `json:"wait"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Command == "" {
		vercelErr(w, http.StatusBadRequest, "bad_request", "command is required")
		return
	}
	if body.Cwd == "" {
		body.Cwd = "/vercel/sandbox"
	}
	v.mu.Lock()
	v.next++
	cid := fmt.Sprintf("cmd_%d", v.next)
	v.mu.Unlock()
	cmd := map[string]any{"id": cid, "name": body.Command, "args": body.Args, "cwd": body.Cwd, "sandboxId": b.ID,
		"exitCode": nil, "startedAt": time.Now().UnixMilli()}
	code, out, errOut, err := v.s.Run(r.Context(), b.ID, body.Cwd, append([]string{body.Command}, body.Args...))
	if err != nil {
		vercelErr(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	var logs []vercelLog
	if len(out) > 0 {
		logs = append(logs, vercelLog{"stdout", string(out)})
	}
	if len(errOut) > 0 {
		logs = append(logs, vercelLog{"stderr", string(errOut)})
	}
	v.mu.Lock()
	v.logs[cid] = logs
	v.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	_ = enc.Encode(map[string]any{"command": cmd})
	cmd["exitCode"] = code
	_ = enc.Encode(map[string]any{"command": cmd})
}

// write unpacks the gzipped tar of regular files into x-cwd.
func (v *vercel) write(r *http.Request, b Box) error {
	dir := r.Header.Get("x-cwd")
	if !path.IsAbs(dir) {
		return fmt.Errorf("x-cwd %q is not absolute", dir)
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "..") {
			return fmt.Errorf("entry %q: only plain relative files are written", h.Name)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := v.s.writeFileAt(b.ID, path.Join(dir, h.Name), body, 0o644); err != nil {
			return err
		}
	}
}
